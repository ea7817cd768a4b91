// Package kvopen opens the KV store that configuration names: SQLite in
// the data directory by default, PostgreSQL when a database URL says so.
// It is the one place that knows every engine, so internal/kv needs none.
package kvopen

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/kv"
	"github.com/nekro-go/nekro/internal/kv/postgres"
	"github.com/nekro-go/nekro/internal/kv/sqlite"
)

// EnvDatabaseURL is the environment variable that selects the database
// when the configuration does not.
const EnvDatabaseURL = "NEKRO_DATABASE_URL"

// Config selects and tunes the store.
type Config struct {
	// DatabaseURL picks the engine: "" or "sqlite:" uses SQLitePath;
	// "sqlite:PATH" (or "file:PATH") uses that file; "postgres://..." or
	// "postgresql://..." uses PostgreSQL.
	DatabaseURL string
	// SQLitePath is the embedded database, usually files.Layout.Database().
	SQLitePath string
	// FullSync makes SQLite fsync every commit (see db.SQLiteOptions).
	FullSync bool
	// Limits, SweepEvery and Log go to kv.Options.
	Limits     kv.Limits
	SweepEvery time.Duration
	Log        *slog.Logger
}

// Engine opens the engine cfg names.
func Engine(ctx context.Context, cfg Config) (kv.Engine, error) {
	u := cfg.DatabaseURL
	switch {
	case strings.HasPrefix(u, "postgres://"), strings.HasPrefix(u, "postgresql://"):
		return postgres.Open(ctx, u)
	case u == "", u == "sqlite:":
		if cfg.SQLitePath == "" {
			return nil, fmt.Errorf("kv: no database: neither a URL nor a SQLite path")
		}
		return sqlite.Open(ctx, cfg.SQLitePath, db.SQLiteOptions{FullSync: cfg.FullSync})
	case strings.HasPrefix(u, "sqlite:"):
		return sqlite.Open(ctx, strings.TrimPrefix(strings.TrimPrefix(u, "sqlite:"), "//"), db.SQLiteOptions{FullSync: cfg.FullSync})
	case strings.HasPrefix(u, "file:"):
		return sqlite.Open(ctx, strings.TrimPrefix(u, "file:"), db.SQLiteOptions{FullSync: cfg.FullSync})
	}
	scheme, _, _ := strings.Cut(u, ":")
	return nil, fmt.Errorf("kv: database URL scheme %q is not one of postgres, postgresql, sqlite, file", scheme)
}

// Open opens the store cfg names. Close it with Store.Close.
func Open(ctx context.Context, cfg Config) (*kv.Store, error) {
	eng, err := Engine(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return kv.New(eng, kv.Options{Limits: cfg.Limits, SweepEvery: cfg.SweepEvery, Log: cfg.Log}), nil
}
