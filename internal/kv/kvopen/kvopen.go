// Package kvopen opens the KV store on a database: the one place that
// knows every engine, so internal/kv needs none. The database belongs to
// whoever opened it (internal/app): closing the store leaves it open.
package kvopen

import (
	"context"
	"log/slog"
	"time"

	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/kv"
	"github.com/nekro-go/nekro/internal/kv/postgres"
	"github.com/nekro-go/nekro/internal/kv/sqlite"
)

// Config says how to run the store (kv.Options).
type Config struct {
	Limits     kv.Limits
	SweepEvery time.Duration
	Log        *slog.Logger
}

// EngineOn returns the KV engine on an open database, migrating it.
func EngineOn(ctx context.Context, h db.Handle) (kv.Engine, error) {
	if h.Postgres != nil {
		return postgres.New(ctx, h.Postgres)
	}
	return sqlite.New(ctx, h.SQLite)
}

// OpenOn returns the store on an open database.
func OpenOn(ctx context.Context, h db.Handle, cfg Config) (*kv.Store, error) {
	eng, err := EngineOn(ctx, h)
	if err != nil {
		return nil, err
	}
	return kv.New(eng, kv.Options{Limits: cfg.Limits, SweepEvery: cfg.SweepEvery, Log: cfg.Log}), nil
}
