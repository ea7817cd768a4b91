package host

import (
	"context"
	"fmt"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/pluginconfig"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/plugin"
)

// PluginConfig returns the settings of the enabled plugin with key, or
// nil when it declared none.
func (h *Host) PluginConfig(key string) *pluginconfig.File {
	h.cfgMu.RLock()
	defer h.cfgMu.RUnlock()
	return h.configs[key]
}

// setPluginConfig makes f the settings of the plugin with key (nil: it
// has none).
func (h *Host) setPluginConfig(key string, f *pluginconfig.File) {
	h.cfgMu.Lock()
	defer h.cfgMu.Unlock()
	if f == nil {
		delete(h.configs, key)
		return
	}
	h.configs[key] = f
}

// openConfig opens p's settings file, data/plugins/<key>/config.yaml,
// writing the defaults when it is missing; nil when p declared none.
func openConfig(layout files.Layout, p *plugin.Plugin) (*pluginconfig.File, error) {
	schema, err := pluginhost.ConfigSchema(p)
	if err != nil || schema == nil {
		return nil, err
	}
	dir, err := layout.EnsurePluginDir(p.Key())
	if err != nil {
		return nil, err
	}
	f, err := pluginconfig.Open(dir, schema)
	if err != nil {
		return nil, err
	}
	if err := f.Err(); err != nil {
		p.Logger().Error("plugin settings file is not valid: the defaults are in force until it is fixed", "err", err)
	}
	return f, nil
}

// OpenPluginConfig opens the settings of p for a command that runs no
// host (`nekro plugins config`): its data directory is made available as
// a running runtime would (runtime.OpenLayout: a volume is mounted, or
// shared with the nekro process that holds it). Call release when done;
// a running nekro sees a change within a second.
func OpenPluginConfig(ctx context.Context, cfg runtime.Config, p *plugin.Plugin) (f *pluginconfig.File, release func(), err error) {
	layout, release, err := runtime.OpenLayout(cfg)
	if err != nil {
		return nil, nil, err
	}
	f, err = openConfig(layout, p)
	if err != nil {
		release()
		return nil, nil, err
	}
	if f == nil {
		release()
		return nil, nil, fmt.Errorf("plugin %s: %w", p.Key(), pluginconfig.ErrNoConfig)
	}
	return f, release, nil
}
