package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
)

// hostServices is what the host gives a plugin outside any run (in its
// init and cleanup hooks, for instance): pluginhost.Services, bound with
// pluginhost.Bind before the init hooks run. It has all of Services'
// methods, so the compiler checks that the host can bind one and read it
// back (pluginhost.ServicesOf).
type hostServices interface {
	// Store returns the plugin's KV namespace.
	Store() Store
	// DataDir returns the plugin's private directory, data/plugins/<key>/,
	// creating it on first use.
	DataDir() (string, error)
	// Logger returns the host's logger, tagged with the plugin's key.
	Logger() *slog.Logger
	// ConfigJSON returns the plugin's settings in force as a JSON object
	// and their version (it changes whenever they do); nil when the
	// plugin mounted none.
	ConfigJSON() (json.RawMessage, uint64)
	// PushSystem adds a system message to a chat; with trigger a turn
	// answers it.
	PushSystem(ctx context.Context, chatKey, text string, trigger bool) error
	// SetConfig changes the named settings (for the host; plugins do not
	// call it).
	SetConfig(changes map[string]any) error
}

func (p *Plugin) bind(h hostServices) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.host = h
}

func (p *Plugin) services() hostServices {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.host
}

// DataDir returns the plugin's private directory, data/plugins/<author>.<module>/,
// created on first use.
func (p *Plugin) DataDir() (string, error) {
	h := p.services()
	if h == nil {
		return "", ErrNoService
	}
	return h.DataDir()
}

// PushSystem adds text to the chat chatKey as a system message, for the
// AI; with trigger a turn answers it as it would a user's message (after
// a running one). For timers, webhooks and background work: inside a
// sandbox method use Ctx.PushSystem, which can reach only the run's chat.
// The plugins' OnSystemMessage hooks screen it first.
func (p *Plugin) PushSystem(ctx context.Context, chatKey, text string, trigger bool) error {
	h := p.services()
	if h == nil {
		return fmt.Errorf("push system message: %w", ErrNoService)
	}
	return h.PushSystem(ctx, chatKey, text, trigger)
}

// Logger returns the plugin's logger: the host's, tagged with the
// plugin's key, so plugin logs follow the operator's --log-level. Before
// the host binds the plugin it is slog.Default's.
func (p *Plugin) Logger() *slog.Logger {
	if h := p.services(); h != nil {
		return h.Logger()
	}
	return slog.Default().With("plugin", p.Key())
}

// Logger returns the plugin's logger, tagged with the run's chat and id.
func (c *Ctx) Logger() *slog.Logger {
	return c.plugin.Logger().With("chat", c.info.ChatKey, "run", c.info.RunID)
}
