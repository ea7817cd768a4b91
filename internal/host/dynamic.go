package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/plugin"
)

// ReplacePlugin puts p in the place of the enabled-or-not plugin with p's
// key, one the registry was told is dynamic (registry.Dynamic: an MCP
// server's plugin, whose tools list changed). The next runs' stubs, the
// next turns' prompts, the API's plugin lists and /mcp see p's methods;
// a run in progress keeps the methods it started with while the plugin
// stays enabled. p gets the host's services before any caller can
// reach it; the key's state (enabled, settings, store, data directory)
// carries over, and p's init hooks do not run (the key's did).
//
// Warm spares are discarded: their stubs offer the old methods (and could
// not be taken anyway: spares are keyed by the methods themselves).
func (h *Host) ReplacePlugin(p *plugin.Plugin) error {
	pluginhost.Bind(p, hostServices{h: h, p: p})
	if _, err := h.registry.Replace(p); err != nil {
		return fmt.Errorf("replace plugin %s: %w", p.Key(), err)
	}
	h.rt.DropSpares()
	h.log.Info("plugin's methods changed: the next runs see them", "plugin", p.Key(), "methods", len(pluginhost.Methods(p)))
	return nil
}

// SwapPlugin puts p, a new version of a dynamic plugin (a Python plugin
// whose files changed), in the place of the plugin with p's key. Unlike
// ReplacePlugin, p is a new instance that has never run: it gets the
// host's services and its settings (opened again, its schema may have
// changed), then its init hooks run, and only if they succeed do the
// next calls go to p. A failure leaves the old plugin in place. The key's
// state (enabled, store, data directory) carries over.
//
// It returns the plugin p replaced: the caller lets that one's calls in
// flight finish on it, then runs its cleanup.
func (h *Host) SwapPlugin(ctx context.Context, p *plugin.Plugin) (*plugin.Plugin, error) {
	f, err := openConfig(h.layout, p)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: settings: %w", p.Key(), err)
	}
	pluginhost.Bind(p, hostServices{h: h, p: p})
	prev := h.PluginConfig(p.Key())
	h.setPluginConfig(p.Key(), f)
	inits, _, _ := pluginhost.Hooks(p)
	for _, hook := range inits {
		if err := hook(ctx); err != nil {
			h.setPluginConfig(p.Key(), prev)
			return nil, fmt.Errorf("plugin %s: the new version's init failed (the old one stays): %w", p.Key(), err)
		}
	}
	old, err := h.registry.Replace(p)
	if err != nil {
		h.setPluginConfig(p.Key(), prev)
		return nil, fmt.Errorf("plugin %s: %w", p.Key(), err)
	}
	h.rt.DropSpares()
	h.log.Info("plugin reloaded: the next calls go to the new version", "plugin", p.Key(), "methods", len(pluginhost.Methods(p)))
	return old, nil
}

// AddPlugin hosts p, a plugin that appeared while the host runs (a Python
// plugin installed into a plugin directory): it gets its settings and
// the host's services, its init hooks run unless the operator turned its
// key off, and its methods join the next runs. A key already hosted or a
// method name another plugin mounts is an error.
func (h *Host) AddPlugin(ctx context.Context, p *plugin.Plugin) error {
	f, err := openConfig(h.layout, p)
	if err != nil {
		return fmt.Errorf("plugin %s: settings: %w", p.Key(), err)
	}
	off, err := h.states.Disabled(ctx)
	if err != nil {
		return err
	}
	pluginhost.Bind(p, hostServices{h: h, p: p})
	h.setPluginConfig(p.Key(), f)
	h.stateMu.Lock()
	err = h.registry.Add(ctx, p, off[p.Key()])
	h.stateMu.Unlock()
	if err != nil {
		if h.PluginConfig(p.Key()) == f {
			h.setPluginConfig(p.Key(), nil)
		}
		return fmt.Errorf("add plugin %s: %w", p.Key(), err)
	}
	h.rt.DropSpares()
	h.log.Info("plugin added", "plugin", p.Key(), "methods", len(pluginhost.Methods(p)))
	return nil
}

// RemovePlugin stops hosting the dynamic plugin with key (a Python plugin
// removed from its directory): its background tasks are cancelled and
// its methods leave the next runs. Its store, settings and data
// directory stay (removing them is the operator's choice: nekro plugins
// remove --purge). It returns the plugin and whether its init ran: the
// caller lets its calls in flight finish, then runs its cleanup.
func (h *Host) RemovePlugin(ctx context.Context, key string) (*plugin.Plugin, bool, error) {
	h.cancelTasks(key)
	h.stateMu.Lock()
	p, inited, err := h.registry.Remove(key)
	h.stateMu.Unlock()
	if err != nil {
		return nil, false, err
	}
	h.setPluginConfig(key, nil)
	h.rt.DropSpares()
	h.log.Info("plugin removed", "plugin", key)
	return p, inited, nil
}

// Reloader loads plugins again from their source while the host runs
// (package pyplugin's Set: a Python plugin's files).
type Reloader interface {
	// Reload loads the plugin with key again and swaps it in
	// (SwapPlugin); calls in flight finish on the old version.
	Reload(ctx context.Context, key string) error
	// Reloadable reports whether Reload can load the plugin with key
	// (it was loaded from files).
	Reloadable(key string) bool
}

// ErrNotReloadable is ReloadPlugin's error for a plugin that is not
// loaded from files (compiled in, an MCP server's), or when no
// Reloader was set.
var ErrNotReloadable = errors.New("plugin is not loaded from files: it cannot be reloaded")

// SetReloader sets what ReloadPlugin uses (nekro serve sets the Python
// plugins').
func (h *Host) SetReloader(r Reloader) {
	h.reloadMu.Lock()
	h.reloader = r
	h.reloadMu.Unlock()
}

// Reloadable reports whether ReloadPlugin can reload the plugin with
// key (the web UI shows its Reload button then).
func (h *Host) Reloadable(key string) bool {
	h.reloadMu.Lock()
	r := h.reloader
	h.reloadMu.Unlock()
	return r != nil && r.Reloadable(key)
}

// ReloadPlugin loads the plugin with key again from its files (POST
// /api/plugins/{key}/reload): the next calls go to the new version,
// those in flight finish on the old one. ErrNotReloadable (wrapped) for a
// plugin not loaded from files.
func (h *Host) ReloadPlugin(ctx context.Context, key string) error {
	h.reloadMu.Lock()
	r := h.reloader
	h.reloadMu.Unlock()
	if r == nil {
		return fmt.Errorf("plugin %s: %w", key, ErrNotReloadable)
	}
	return r.Reload(ctx, key)
}
