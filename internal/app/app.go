// Package app is nekro's composition root: the one place that opens the
// database and assembles the KV store, the chat service, the runtime and
// the agent on it, for every command (serve, exec, chats, plugins, kv,
// doctor, the benches). Each part receives what it uses; none opens a
// database or reads the environment for another. The App owns the
// database: the parts built on it never close it.
package app

import (
	"context"
	"errors"
	"fmt"
	"github.com/nekro-go/nekro/internal/llm"
	"log/slog"
	"os"
	"time"

	"github.com/nekro-go/nekro/internal/agent"
	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/kv"
	"github.com/nekro-go/nekro/internal/kv/kvopen"
	"github.com/nekro-go/nekro/internal/runtime"
)

// Config is what an App is made of. The zero value plus DataDir is a
// working single-machine setup with no model.
type Config struct {
	// DataDir is the data directory; default "data".
	DataDir string
	// DatabaseURL selects the database of the KV store, the chats and the
	// sandbox uids: "" means SQLite in the data directory, "postgres://..."
	// PostgreSQL (see db.Open). The CLI fills it from --database or
	// NEKRO_DATABASE_URL.
	DatabaseURL string
	// SQLite tunes the embedded database.
	SQLite db.SQLiteOptions
	// KV limits the plugins' values.
	KV kv.Limits
	// Runtime configures the sandboxes; its DataDir, Log, DB and Store
	// are filled in here.
	Runtime runtime.Config
	// LLM names the model; when incomplete the agent answers no turn and
	// says why (runs without a model still work).
	LLM llm.Config
	// Agent tunes turns.
	Agent agent.Config
	Log   *slog.Logger
}

// App is an assembled nekro: everything a command uses.
type App struct {
	Layout  files.Layout
	DB      db.Handle
	Store   *kv.Store
	Chats   *chat.Service
	Runtime *runtime.Runtime
	Agent   *agent.Agent
	// Model is the configured model's name, "" when none.
	Model string

	log     *slog.Logger
	closers []func(context.Context) error // in opening order
}

func (c *Config) defaults() {
	if c.DataDir == "" {
		c.DataDir = "data"
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

// OpenStore opens the database and the plugin KV store on it, and nothing
// else: what `nekro kv` needs.
func OpenStore(ctx context.Context, cfg Config) (*App, error) {
	cfg.defaults()
	a := &App{log: cfg.Log}
	if err := a.openStore(ctx, cfg); err != nil {
		a.Close(ctx)
		return nil, err
	}
	return a, nil
}

// Open assembles every part. On error, what was opened is closed.
func Open(ctx context.Context, cfg Config) (_ *App, err error) {
	cfg.defaults()
	a := &App{log: cfg.Log}
	defer func() {
		if err != nil {
			a.Close(context.WithoutCancel(ctx))
		}
	}()
	if err := a.openStore(ctx, cfg); err != nil {
		return nil, err
	}
	if a.Chats, err = chat.Open(ctx, a.DB, a.Layout, cfg.Log); err != nil {
		return nil, err
	}
	a.closers = append(a.closers, func(context.Context) error { return a.Chats.Close() })

	rc := cfg.Runtime
	rc.DataDir, rc.DB, rc.Store = cfg.DataDir, a.DB, a.Store
	if rc.Log == nil {
		rc.Log = cfg.Log
	}
	if a.Runtime, err = runtime.Open(ctx, rc); err != nil {
		return nil, err
	}
	a.closers = append(a.closers, func(ctx context.Context) error {
		// Cleanup hooks run even when the agent used up ctx's time.
		return a.Runtime.Close(context.WithoutCancel(ctx))
	})

	var model llm.Model
	ac := cfg.Agent
	if ac.Log == nil {
		ac.Log = cfg.Log
	}
	if err := cfg.LLM.Check(); err != nil {
		model = llm.None{Reason: err}
		if !errors.Is(err, llm.ErrNoModel) || cfg.LLM.BaseURL != "" || cfg.LLM.Model != "" {
			cfg.Log.Warn("model configuration incomplete", "err", err)
		}
	} else {
		c, err := llm.NewClient(cfg.LLM)
		if err != nil {
			return nil, err
		}
		model, a.Model = c, c.Model()
	}
	a.Agent = agent.New(a.Runtime, a.Chats, model, ac)
	a.closers = append(a.closers, a.Agent.Shutdown)
	return a, nil
}

func (a *App) openStore(ctx context.Context, cfg Config) error {
	layout, err := files.NewLayout(cfg.DataDir)
	if err != nil {
		return err
	}
	a.Layout = layout
	// Sandboxes run as other uids and must traverse to their directories:
	// the data directory (and any parent made here) is 0711, not db.Open's
	// 0700.
	if err := os.MkdirAll(layout.Root, 0o711); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	h, err := db.Open(ctx, cfg.DatabaseURL, layout.Database(), cfg.SQLite)
	if err != nil {
		return err
	}
	a.DB = h
	a.closers = append(a.closers, func(context.Context) error { return h.Close() })
	st, err := kvopen.OpenOn(ctx, h, kvopen.Config{Limits: cfg.KV, SweepEvery: time.Minute, Log: cfg.Log})
	if err != nil {
		return fmt.Errorf("kv store: %w", err)
	}
	a.Store = st
	a.closers = append(a.closers, st.Close)
	return nil
}

// Close closes every part in reverse order of opening: the agent lets
// turns finish until ctx ends, the runtime stops its sandboxes and runs
// the plugins' cleanup hooks, and the database goes last.
func (a *App) Close(ctx context.Context) error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		if err := a.closers[i](ctx); err != nil {
			errs = append(errs, err)
		}
	}
	a.closers = nil
	return errors.Join(errs...)
}
