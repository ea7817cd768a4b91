package plugin

import "log/slog"

// HostServices is what the runtime gives a plugin outside any run (in its
// init and cleanup hooks, for instance). The runtime implements it and binds
// it with Bind before the init hooks run.
type HostServices interface {
	// Store returns the plugin's KV namespace.
	Store() Store
	// DataDir returns the plugin's private directory, data/plugins/<key>/,
	// creating it on first use.
	DataDir() (string, error)
	// Logger returns the runtime's logger, tagged with the plugin's key.
	Logger() *slog.Logger
}

// Bind attaches the runtime's services to p. The runtime calls it.
func (p *Plugin) Bind(h HostServices) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.host = h
}

func (p *Plugin) hostServices() HostServices {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.host
}

// DataDir returns the plugin's private directory, data/plugins/<author>.<module>/,
// created on first use.
func (p *Plugin) DataDir() (string, error) {
	h := p.hostServices()
	if h == nil {
		return "", ErrNoService
	}
	return h.DataDir()
}

// Logger returns the plugin's logger: the runtime's, tagged with the
// plugin's key, so plugin logs follow the operator's --log-level. Before
// the runtime binds the plugin it is slog.Default's.
func (p *Plugin) Logger() *slog.Logger {
	if h := p.hostServices(); h != nil {
		return h.Logger()
	}
	return slog.Default().With("plugin", p.Key())
}

// Logger returns the plugin's logger, tagged with the run's chat and id.
func (c *Ctx) Logger() *slog.Logger {
	return c.plugin.Logger().With("chat", c.env.ChatKey, "run", c.env.RunID)
}
