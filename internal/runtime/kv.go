package runtime

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/kv"
	"github.com/nekro-go/nekro/internal/kv/kvopen"
	"github.com/nekro-go/nekro/plugin"
)

// openStore opens the plugin KV store: PostgreSQL when Config.DatabaseURL
// (or NEKRO_DATABASE_URL) names one, else SQLite in data/nekro.db.
func (rt *Runtime) openStore(ctx context.Context) error {
	if rt.cfg.DatabaseURL == "" {
		rt.cfg.DatabaseURL = os.Getenv(kvopen.EnvDatabaseURL)
	}
	st, err := kvopen.Open(ctx, kvopen.Config{
		DatabaseURL: rt.cfg.DatabaseURL,
		SQLitePath:  rt.layout.Database(),
		Limits:      rt.cfg.KV,
		SweepEvery:  time.Minute,
		Log:         rt.log,
	})
	if err != nil {
		return err
	}
	rt.store = st
	return nil
}

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
