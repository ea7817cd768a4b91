package host

import (
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
