package db_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/kv/kvtest"
)

// migrator abstracts the two databases for the shared cases.
type migrator struct {
	migrate func(component string, ms []db.Migration) error
	count   func(table string) int // rows of table, -1 if it does not exist
}

var (
	v1 = db.Migration{Version: 1, Name: "create a", SQL: `CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1)`}
	v2 = db.Migration{Version: 2, Name: "add to a", SQL: `INSERT INTO a VALUES (2); INSERT INTO a VALUES (3)`}
	b1 = db.Migration{Version: 1, Name: "create b", SQL: `CREATE TABLE b (y INTEGER)`}
)

func runMigrations(t *testing.T, m migrator) {
	if err := m.migrate("comp_a", []db.Migration{v1}); err != nil {
		t.Fatal(err)
	}
	if n := m.count("a"); n != 1 {
		t.Fatalf("after v1: %d rows", n)
	}
	// Running the same list again does nothing; a longer list runs only
	// the new step.
	for range 2 {
		if err := m.migrate("comp_a", []db.Migration{v1, v2}); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.count("a"); n != 3 {
		t.Fatalf("after v2: %d rows, want 3 (each step once)", n)
	}
	// Another component migrates on its own.
	if err := m.migrate("comp_b", []db.Migration{b1}); err != nil {
		t.Fatal(err)
	}
	if n := m.count("b"); n != 0 {
		t.Fatalf("table b: %d", n)
	}
	// An older binary refuses a newer database; a renamed step is refused.
	err := m.migrate("comp_a", []db.Migration{v1})
	if err == nil || !strings.Contains(err.Error(), "newer than this binary") {
		t.Fatalf("older list: %v", err)
	}
	renamed := v2
	renamed.Name = "something else"
	if err := m.migrate("comp_a", []db.Migration{v1, renamed}); err == nil || !strings.Contains(err.Error(), "recorded as") {
		t.Fatalf("renamed step: %v", err)
	}
	// A failing step leaves nothing behind.
	bad := db.Migration{Version: 2, Name: "bad", SQL: `CREATE TABLE c (z INTEGER); THIS IS NOT SQL`}
	if err := m.migrate("comp_b", []db.Migration{b1, bad}); err == nil {
		t.Fatal("a failing step succeeded")
	}
	if n := m.count("c"); n != -1 {
		t.Fatal("a failed step's table exists")
	}
	if err := m.migrate("comp_c", []db.Migration{{Version: 2, Name: "x", SQL: "SELECT 1"}}); err == nil {
		t.Fatal("a list not starting at version 1 was accepted")
	}
	// Concurrent openers apply each step once.
	var wg sync.WaitGroup
	steps := []db.Migration{
		{Version: 1, Name: "create d", SQL: `CREATE TABLE d (x INTEGER)`},
		{Version: 2, Name: "fill d", SQL: `INSERT INTO d VALUES (1)`},
	}
	for range 4 {
		wg.Go(func() {
			if err := m.migrate("comp_d", steps); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := m.count("d"); n != 1 {
		t.Fatalf("concurrent migrations: %d rows, want 1", n)
	}
}

func TestMigrateSQLite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "nekro.db")
	d, err := db.OpenSQLite(ctx, path, db.SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	runMigrations(t, migrator{
		migrate: func(c string, ms []db.Migration) error { return db.MigrateSQLite(ctx, d, c, ms) },
		count: func(table string) int {
			var n int
			if err := d.Read.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
				return -1
			}
			return n
		},
	})
	if err := d.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestMigratePostgres(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, kvtest.FreshSchema(t, kvtest.PostgresURL(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	runMigrations(t, migrator{
		migrate: func(c string, ms []db.Migration) error { return db.MigratePostgres(ctx, pool, c, ms) },
		count: func(table string) int {
			var n int
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
				return -1
			}
			return n
		},
	})
}
