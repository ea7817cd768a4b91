package plugin

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
)

// Config is a plugin's typed settings, declared with MountConfig. The
// operator changes them in data/plugins/<author>.<module>/config.yaml (by
// hand), with `nekro plugins config KEY --set FIELD=VALUE` or through the
// API; a running nekro picks a change up without a restart, and Get
// returns the value in force.
type Config[T any] struct {
	p        *Plugin
	defaults T
	cache    atomic.Pointer[configValue[T]]
}

type configValue[T any] struct {
	version uint64
	value   T
}

// MountConfig declares p's settings. T is a struct: each exported field is
// a setting named by its json tag, and defaults holds the default values.
// Tags describe a setting to the operator and bound its values:
//
//	type Settings struct {
//		APIKey  string `json:"api_key" title:"API key" description:"from the provider's console" secret:"true"`
//		Timeout int    `json:"timeout" title:"Timeout (s)" min:"1" max:"60"`
//		Units   string `json:"units" choices:"metric,imperial"`
//		Prompt  string `json:"prompt" multiline:"true"`
//	}
//	var settings = plugin.MountConfig(p, Settings{Timeout: 10, Units: "metric"})
//
// and, in a method, settings.Get().Timeout. Tags secret (masked wherever
// it is shown), multiline, hidden and required take "true". A plugin
// mounts one config; a second call panics.
func MountConfig[T any](p *Plugin, defaults T) *Config[T] {
	c := &Config[T]{p: p, defaults: defaults}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.config != nil {
		panic(fmt.Sprintf("plugin %s: MountConfig called twice", p.Key()))
	}
	p.config = &configDecl{defaults: defaults, get: func() any { return c.Get() }}
	return c
}

// Get returns the settings in force: the defaults until the runtime has
// bound the plugin, then what the operator set.
func (c *Config[T]) Get() T {
	h := c.p.services()
	if h == nil {
		return c.defaults
	}
	raw, version := h.ConfigJSON()
	if raw == nil {
		return c.defaults
	}
	if cv := c.cache.Load(); cv != nil && cv.version == version {
		return cv.value
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		c.p.Logger().Error("settings do not fit the plugin's type; using the defaults", "err", err)
		return c.defaults
	}
	c.cache.Store(&configValue[T]{version: version, value: v})
	return v
}

// configDecl is what MountConfig (or a Python plugin's ConfigBase)
// declared.
type configDecl struct {
	defaults any             // a Go plugin's struct value
	fields   json.RawMessage // or a Python plugin's fields (pluginconfig.Field)
	get      func() any
}

// Config returns the plugin's settings in force (a T of MountConfig, as
// any), or nil when it mounted none.
func (p *Plugin) Config() any {
	p.mu.RLock()
	d := p.config
	p.mu.RUnlock()
	if d == nil || d.get == nil {
		return nil
	}
	return d.get()
}

// Config returns the settings in force of the method's plugin; see
// Plugin.Config.
func (c *Ctx) Config() any { return c.plugin.Config() }
