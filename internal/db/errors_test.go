package db_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/nekro-go/nekro/internal/db"
)

// Errors are told apart as the API maps them: a full disk (507), a
// database that cannot be reached (503), anything else (the request's
// own fault).
func TestStorageErrors(t *testing.T) {
	// A PostgreSQL server that is not there: a real refused connection.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, refused := pgconn.Connect(ctx, fmt.Sprintf("postgres://u:p@%s/x?sslmode=disable&connect_timeout=5", addr))
	if refused == nil {
		t.Fatal("connected to nothing")
	}
	// A real SQLite error that is neither (a syntax error).
	d, err := db.OpenSQLite(ctx, filepath.Join(t.TempDir(), "t.db"), db.SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	_, syntax := d.Write.ExecContext(ctx, "SELEKT 1")

	for _, c := range []struct {
		name              string
		err               error
		full, unavailable bool
	}{
		{"refused connection", fmt.Errorf("add message: %w", refused), false, true},
		{"ENOSPC", &os.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}, true, false},
		{"SQLITE_FULL text", errors.New("add message: database or disk is full (13)"), true, false},
		{"PostgreSQL disk_full", fmt.Errorf("x: %w", &pgconn.PgError{Code: "53100"}), true, false},
		{"PostgreSQL admin_shutdown", &pgconn.PgError{Code: "57P01"}, false, true},
		{"PostgreSQL unique_violation", &pgconn.PgError{Code: "23505"}, false, false},
		{"SQLite syntax", syntax, false, false},
		{"plain", errors.New("the message is empty"), false, false},
	} {
		if got := db.IsDiskFull(c.err); got != c.full {
			t.Errorf("%s: IsDiskFull = %v (%v)", c.name, got, c.err)
		}
		if got := db.IsUnavailable(c.err); got != c.unavailable {
			t.Errorf("%s: IsUnavailable = %v (%v)", c.name, got, c.err)
		}
	}
}
