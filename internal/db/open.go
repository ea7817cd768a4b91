package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// EnvDatabaseURL names the environment variable holding the database URL.
const EnvDatabaseURL = "NEKRO_DATABASE_URL"

// Handle is an open database shared by nekro's components (the KV store,
// the chat service): exactly one of SQLite and Postgres is set.
type Handle struct {
	SQLite   *SQLite
	Postgres *pgxpool.Pool
}

// Open opens the database a URL names: "postgres://..." or
// "postgresql://..." for PostgreSQL; "sqlite:PATH" or "file:PATH" for a
// SQLite file; "" or "sqlite:" for the SQLite file at sqlitePath (the data
// directory's nekro.db). This is the one place URLs are read.
func Open(ctx context.Context, url, sqlitePath string, opts SQLiteOptions) (Handle, error) {
	path := ""
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		pool, err := OpenPostgres(ctx, url)
		if err != nil {
			return Handle{}, err
		}
		return Handle{Postgres: pool}, nil
	case url == "", url == "sqlite:":
		if sqlitePath == "" {
			return Handle{}, errors.New("db: no database: neither a URL nor a SQLite path")
		}
		path = sqlitePath
	case strings.HasPrefix(url, "sqlite:"):
		path = strings.TrimPrefix(strings.TrimPrefix(url, "sqlite:"), "//")
	case strings.HasPrefix(url, "file:"):
		path = strings.TrimPrefix(url, "file:")
	default:
		scheme, _, _ := strings.Cut(url, ":")
		return Handle{}, fmt.Errorf("db: database URL scheme %q is not one of postgres, postgresql, sqlite, file", scheme)
	}
	d, err := OpenSQLite(ctx, path, opts)
	if err != nil {
		return Handle{}, err
	}
	return Handle{SQLite: d}, nil
}

// Close closes the database.
func (h Handle) Close() error {
	if h.Postgres != nil {
		h.Postgres.Close()
	}
	if h.SQLite != nil {
		return h.SQLite.Close()
	}
	return nil
}

// Writer migrates a component whose one migration list both databases
// accept (portable SQL, $1 placeholders) on whichever database h holds,
// and returns a *sql.DB writing to it with the function that releases it
// (SQLite's writer is h's and stays open; PostgreSQL's is a view of h's
// pool).
func Writer(ctx context.Context, h Handle, component string, ms []Migration) (*sql.DB, func() error, error) {
	switch {
	case h.SQLite != nil:
		if err := MigrateSQLite(ctx, h.SQLite, component, ms); err != nil {
			return nil, nil, err
		}
		return h.SQLite.Write, func() error { return nil }, nil
	case h.Postgres != nil:
		if err := MigratePostgres(ctx, h.Postgres, component, ms); err != nil {
			return nil, nil, err
		}
		w := stdlib.OpenDBFromPool(h.Postgres)
		return w, w.Close, nil
	}
	return nil, nil, errors.New("no database")
}
