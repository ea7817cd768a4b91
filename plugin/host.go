package plugin

// HostServices is what the runtime gives a plugin outside any run (in its
// init and cleanup hooks, for instance). The runtime implements it and binds
// it with Bind before the init hooks run.
type HostServices interface {
	// Store returns the plugin's KV namespace.
	Store() Store
	// DataDir returns the plugin's private directory, data/plugins/<key>/,
	// creating it on first use.
	DataDir() (string, error)
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
