// Package kvopen opens the KV store that configuration names: SQLite in
// the data directory by default, PostgreSQL when a database URL says so.
// It is the one place that knows every engine, so internal/kv needs none.
package kvopen

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/kv"
	"github.com/nekro-go/nekro/internal/kv/postgres"
	"github.com/nekro-go/nekro/internal/kv/sqlite"
)

// EnvDatabaseURL is the environment variable that selects the database
// when the configuration does not.
const EnvDatabaseURL = db.EnvDatabaseURL

// Config says which database to open and how to run the store on it.
type Config struct {
	// DatabaseURL picks the engine, as db.Open reads it: "" or "sqlite:"
	// uses SQLitePath; "sqlite:PATH" (or "file:PATH") uses that file;
	// "postgres://..." or "postgresql://..." uses PostgreSQL.
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

// EngineOn returns the KV engine on an open database, migrating it.
// Closing the engine leaves the database open.
func EngineOn(ctx context.Context, h db.Handle) (kv.Engine, error) {
	if h.Postgres != nil {
		return postgres.New(ctx, h.Postgres)
	}
	return sqlite.New(ctx, h.SQLite)
}

// Engine opens the database cfg names and returns the KV engine on it;
// closing the engine closes the database.
func Engine(ctx context.Context, cfg Config) (kv.Engine, error) {
	h, err := db.Open(ctx, cfg.DatabaseURL, cfg.SQLitePath, db.SQLiteOptions{FullSync: cfg.FullSync})
	if err != nil {
		return nil, err
	}
	eng, err := EngineOn(ctx, h)
	if err != nil {
		h.Close()
		return nil, err
	}
	return owning{Engine: eng, h: h}, nil
}

// owning is an engine that also owns its database.
type owning struct {
	kv.Engine
	h db.Handle
}

func (o owning) Close(ctx context.Context) error {
	return errors.Join(o.Engine.Close(ctx), o.h.Close())
}

// Open opens the database cfg names and returns the store on it; closing
// the store closes the database.
func Open(ctx context.Context, cfg Config) (*kv.Store, error) {
	eng, err := Engine(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return kv.New(eng, options(cfg)), nil
}

// OpenOn returns the store on a database shared with other components;
// closing the store leaves the database open.
func OpenOn(ctx context.Context, h db.Handle, cfg Config) (*kv.Store, error) {
	eng, err := EngineOn(ctx, h)
	if err != nil {
		return nil, err
	}
	return kv.New(eng, options(cfg)), nil
}

func options(cfg Config) kv.Options {
	return kv.Options{Limits: cfg.Limits, SweepEvery: cfg.SweepEvery, Log: cfg.Log}
}
