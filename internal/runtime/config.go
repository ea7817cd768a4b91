package runtime

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/pluginconfig"
	"github.com/nekro-go/nekro/plugin"
)

// OpenPluginConfig opens the settings of p for a command that runs no
// runtime (`nekro plugins config`): its data directory is made available
// as a running runtime would (a volume is mounted, or shared with the
// nekro process that holds it). Call release when done; a running nekro
// sees a change within a second.
func OpenPluginConfig(ctx context.Context, cfg Config, p *plugin.Plugin) (f *pluginconfig.File, release func(), err error) {
	if cfg.DataDir == "" {
		cfg.DataDir = "data"
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.PluginDataQuota <= 0 {
		cfg.PluginDataQuota = DefaultPluginDataQuota
	}
	if cfg.SharedInodes <= 0 {
		cfg.SharedInodes = DefaultSharedInodes
	}
	layout, err := files.NewLayout(cfg.DataDir)
	if err != nil {
		return nil, nil, err
	}
	rt := &Runtime{cfg: cfg, layout: layout, log: cfg.Log}
	rt.provision = newProvisioner(rt)
	rt.layout.Provision = rt.provision
	f, err = openConfig(rt.layout, p)
	if err != nil {
		rt.provision.close()
		return nil, nil, err
	}
	if f == nil {
		rt.provision.close()
		return nil, nil, fmt.Errorf("plugin %s: %w", p.Key(), pluginconfig.ErrNoConfig)
	}
	return f, rt.provision.close, nil
}
