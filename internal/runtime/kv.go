package runtime

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/kv"
	"github.com/nekro-go/nekro/internal/kv/kvopen"
	"github.com/nekro-go/nekro/plugin"
)

// openStore opens the database, PostgreSQL when Config.DatabaseURL (or
// NEKRO_DATABASE_URL) names one, else SQLite in data/nekro.db, and the
// plugin KV store on it. Other components (the chat service) share the
// same handle through Database.
func (rt *Runtime) openStore(ctx context.Context) error {
	if rt.cfg.DatabaseURL == "" {
		rt.cfg.DatabaseURL = os.Getenv(db.EnvDatabaseURL)
	}
	h, err := db.Open(ctx, rt.cfg.DatabaseURL, rt.layout.Database(), db.SQLiteOptions{})
	if err != nil {
		return err
	}
	st, err := kvopen.OpenOn(ctx, h, kvopen.Config{Limits: rt.cfg.KV, SweepEvery: time.Minute, Log: rt.log})
	if err != nil {
		h.Close()
		return err
	}
	rt.db, rt.store = h, st
	return nil
}

// Database returns the runtime's database, for components that keep their
// own tables next to the KV store's. The runtime closes it.
func (rt *Runtime) Database() db.Handle { return rt.db }

// Store returns the plugin KV store.
func (rt *Runtime) Store() *kv.Store { return rt.store }

// storeFor gives each run's methods their plugin's namespace; the run's
// chat and user reach the store through the scopes of plugin.Ctx.
func (rt *Runtime) storeFor(p *plugin.Plugin) plugin.Store { return rt.store.For(p.Key()) }

// ResetChat resets a chat: every enabled plugin's on-channel-reset hook
// runs with its key. One plugin's failure does not stop the others; all
// failures are returned.
func (rt *Runtime) ResetChat(ctx context.Context, chatKey string) error {
	if err := files.ValidateKey("chat", chatKey); err != nil {
		return fmt.Errorf("reset chat: %w", err)
	}
	return rt.registry.ChannelReset(ctx, chatKey)
}
