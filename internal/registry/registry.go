// Package registry holds the plugins enabled in one runtime: it checks that
// their method names do not clash, looks methods up for the RPC server, runs
// lifecycle hooks and renders the method docs the AI reads.
//
// A Registry is built from an explicit list of plugins (usually
// pluginhost.Registered()), so tests never touch the global plugin map.
package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/pysig"
	"github.com/nekro-go/nekro/plugin"
)

// Registry is the set of enabled plugins and their methods.
type Registry struct {
	log *slog.Logger

	mu       sync.RWMutex
	plugins  []*plugin.Plugin
	methods  map[string]*pluginhost.MethodInfo
	disabled map[string]string // plugin key -> reason
}

// New builds a registry of the given plugins. Two enabled plugins that
// mount the same Python name are an error naming both.
func New(plugins []*plugin.Plugin, log *slog.Logger) (*Registry, error) {
	if log == nil {
		log = slog.Default()
	}
	r := &Registry{log: log, methods: map[string]*pluginhost.MethodInfo{}, disabled: map[string]string{}}
	sorted := append([]*plugin.Plugin(nil), plugins...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Key() < sorted[j].Key() })
	var errs []error
	seen := map[string]bool{}
	for _, p := range sorted {
		if seen[p.Key()] {
			errs = append(errs, fmt.Errorf("plugin %s is listed twice", p.Key()))
			continue
		}
		seen[p.Key()] = true
		for _, m := range pluginhost.Methods(p) {
			if other, dup := r.methods[m.Name]; dup {
				errs = append(errs, fmt.Errorf("method name %q is mounted by both plugin %s and plugin %s; disable one of them",
					m.Name, other.Plugin().Key(), p.Key()))
				continue
			}
			r.methods[m.Name] = m
		}
		r.plugins = append(r.plugins, p)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return r, nil
}

// Plugins returns the enabled plugins, sorted by key.
func (r *Registry) Plugins() []*plugin.Plugin {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*plugin.Plugin, 0, len(r.plugins))
	for _, p := range r.plugins {
		if _, off := r.disabled[p.Key()]; !off {
			out = append(out, p)
		}
	}
	return out
}

// All returns every plugin of the registry, disabled ones too, sorted by
// key.
func (r *Registry) All() []*plugin.Plugin {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]*plugin.Plugin(nil), r.plugins...)
}

// Plugin returns the enabled plugin with the given key.
func (r *Registry) Plugin(key string) (*plugin.Plugin, error) {
	for _, p := range r.Plugins() {
		if p.Key() == key {
			return p, nil
		}
	}
	r.mu.RLock()
	reason, off := r.disabled[key]
	r.mu.RUnlock()
	if off {
		return nil, fmt.Errorf("plugin %s is disabled: %s", key, reason)
	}
	return nil, fmt.Errorf("unknown plugin %s (not compiled in? import it in plugins/all)", key)
}

// Methods returns the callable methods of the enabled plugins, by plugin
// key and then in mount order.
func (r *Registry) Methods() []*pluginhost.MethodInfo {
	var out []*pluginhost.MethodInfo
	for _, p := range r.Plugins() {
		out = append(out, pluginhost.Methods(p)...)
	}
	return out
}

// Method returns the enabled method with the given Python name.
func (r *Registry) Method(name string) (*pluginhost.MethodInfo, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	m, ok := r.methods[name]
	if !ok {
		return nil, fmt.Errorf("unknown method %q", name)
	}
	if reason, off := r.disabled[m.Plugin().Key()]; off {
		return nil, fmt.Errorf("method %q belongs to disabled plugin %s (%s)", name, m.Plugin().Key(), reason)
	}
	return m, nil
}

// Disable turns a plugin off, e.g. after its init failed.
func (r *Registry) Disable(key, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.disabled[key] = reason
}

// Disabled returns the disabled plugins and why.
func (r *Registry) Disabled() map[string]string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[string]string, len(r.disabled))
	for k, v := range r.disabled {
		out[k] = v
	}
	return out
}

// Init runs every plugin's init hooks. A plugin whose init fails (or
// panics) has its cleanup run and is disabled, with the reason logged; the
// others keep working.
func (r *Registry) Init(ctx context.Context) {
	for _, p := range r.Plugins() {
		inits, _, _ := pluginhost.Hooks(p)
		for _, f := range inits {
			if err := safeHook(func() error { return f(ctx) }); err != nil {
				reason := fmt.Sprintf("init failed: %v", err)
				r.log.Error("plugin disabled", "plugin", p.Key(), "reason", reason)
				r.cleanupOne(context.WithoutCancel(ctx), p)
				r.Disable(p.Key(), reason)
				break
			}
		}
	}
}

// Cleanup runs every plugin's cleanup hooks, logging failures.
func (r *Registry) Cleanup(ctx context.Context) {
	for _, p := range r.Plugins() {
		r.cleanupOne(ctx, p)
	}
}

func (r *Registry) cleanupOne(ctx context.Context, p *plugin.Plugin) {
	_, cleanups, _ := pluginhost.Hooks(p)
	for _, f := range cleanups {
		if err := safeHook(func() error { return f(ctx) }); err != nil {
			r.log.Error("plugin cleanup failed", "plugin", p.Key(), "err", err)
		}
	}
}

// ChannelReset runs every enabled plugin's on-channel-reset hooks for
// chatKey. One plugin's failure does not stop the others; all failures are
// returned joined.
func (r *Registry) ChannelReset(ctx context.Context, chatKey string) error {
	var errs []error
	for _, p := range r.Plugins() {
		_, _, resets := pluginhost.Hooks(p)
		for _, f := range resets {
			if err := safeHook(func() error { return f(ctx, chatKey) }); err != nil {
				r.log.Error("plugin channel reset failed", "plugin", p.Key(), "chat", chatKey, "err", err)
				errs = append(errs, fmt.Errorf("plugin %s: channel reset: %w", p.Key(), err))
			}
		}
	}
	return errors.Join(errs...)
}

func safeHook(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return f()
}

// RenderMethods renders the enabled plugins' methods as the AI reads them:
// one <plugin> block per plugin, each method as its Python signature and
// doc text, AGENT and MULTIMODAL_AGENT methods marked as ending the run.
// The output depends only on the enabled set, so it can head a prompt and
// stay cacheable.
func (r *Registry) RenderMethods() string {
	var b strings.Builder
	for _, p := range r.Plugins() {
		ms := pluginhost.Methods(p)
		if len(ms) == 0 {
			continue
		}
		fmt.Fprintf(&b, "<plugin name=%q module_name=%q>\n<predefined_methods>\n", p.Meta().Name, p.Meta().ModuleName)
		for _, m := range ms {
			fmt.Fprintf(&b, "* %s", pysig.Signature(m))
			if m.Type.EndsRun() {
				b.WriteString(" - **[AGENT METHOD - STOP AFTER CALL]**")
			}
			b.WriteString("\n")
			for _, line := range strings.Split(pysig.Doc(m), "\n") {
				b.WriteString("    " + line + "\n")
			}
		}
		b.WriteString("</predefined_methods>\n</plugin>\n")
	}
	return b.String()
}
