// Package registry holds the plugins enabled in one host: it checks that
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
	"slices"
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
	disabled map[string]string // plugin key -> reason (its init failed)
	off      map[string]bool   // turned off by the operator
	inited   map[string]bool   // init hooks ran and succeeded
	dynamic  map[string]bool   // plugins whose methods may be replaced (Replace)
	replaced map[string]string // compiled-in plugin key -> "replaced by KEY (same method NAME)"
}

// Option tunes New.
type Option func(*options)

type options struct {
	installed map[string]bool
}

// Installed names the plugins the operator installed (the Python plugins
// of --plugin-dir), as against those compiled into nekro (its built-in
// ports: nekro.dice, nekro.note, ...). An installed plugin that mounts a
// method name, or a chat command name, that a compiled-in plugin also
// mounts replaces that plugin whole: the compiled-in one stays off, its
// methods, commands, hooks and prompt text out of every chat, and
// Disabled and Replaced say "replaced by KEY (same method NAME)". The
// whole plugin leaves, not only its clashing methods: the two are
// versions of one plugin (the reference's original and nekro's port),
// and what is left of one (its prompt text, its other methods, over data
// the other keeps) would answer beside the other's. A clash between two
// installed plugins, or two compiled-in ones, stays an error.
func Installed(keys ...string) Option {
	return func(o *options) {
		for _, k := range keys {
			o.installed[k] = true
		}
	}
}

// New builds a registry of the given plugins. Two enabled plugins that
// mount the same Python name are an error naming both, but for an
// installed plugin replacing a compiled-in one (see Installed).
func New(plugins []*plugin.Plugin, log *slog.Logger, opts ...Option) (*Registry, error) {
	if log == nil {
		log = slog.Default()
	}
	o := options{installed: map[string]bool{}}
	for _, f := range opts {
		f(&o)
	}
	r := &Registry{log: log, methods: map[string]*pluginhost.MethodInfo{}, disabled: map[string]string{},
		off: map[string]bool{}, inited: map[string]bool{}, dynamic: map[string]bool{}, replaced: map[string]string{}}
	sorted := append([]*plugin.Plugin(nil), plugins...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Key() < sorted[j].Key() })
	r.replaced = replacements(sorted, o.installed)
	for key, why := range r.replaced {
		log.Info("built-in plugin off: an installed plugin replaces it", "plugin", key, "reason", why)
	}
	var errs []error
	seen := map[string]bool{}
	for _, p := range sorted {
		if seen[p.Key()] {
			errs = append(errs, fmt.Errorf("plugin %s is listed twice", p.Key()))
			continue
		}
		seen[p.Key()] = true
		if _, gone := r.replaced[p.Key()]; gone {
			r.plugins = append(r.plugins, p) // listed (All), never enabled
			continue
		}
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

// replacements finds the compiled-in plugins an installed plugin
// replaces (see Installed), with why: the first of the compiled-in
// plugin's methods, then of its command names, that an installed plugin
// (the first by key) also mounts.
func replacements(sorted []*plugin.Plugin, installed map[string]bool) map[string]string {
	out := map[string]string{}
	if len(installed) == 0 {
		return out
	}
	methods, commands := map[string]string{}, map[string]string{}
	for _, p := range sorted {
		if !installed[p.Key()] {
			continue
		}
		for _, m := range pluginhost.Methods(p) {
			if _, ok := methods[m.Name]; !ok {
				methods[m.Name] = p.Key()
			}
		}
		for _, c := range pluginhost.Commands(p) {
			for _, n := range append([]string{c.Name}, c.Aliases...) {
				if _, ok := commands[n]; !ok {
					commands[n] = p.Key()
				}
			}
		}
	}
	for _, p := range sorted {
		if installed[p.Key()] {
			continue
		}
		why := ""
		for _, m := range pluginhost.Methods(p) {
			if by, ok := methods[m.Name]; ok {
				why = fmt.Sprintf("replaced by %s (same method %s)", by, m.Name)
				break
			}
		}
		if why == "" {
		cmds:
			for _, c := range pluginhost.Commands(p) {
				for _, n := range append([]string{c.Name}, c.Aliases...) {
					if by, ok := commands[n]; ok {
						why = fmt.Sprintf("replaced by %s (same command /%s)", by, n)
						break cmds
					}
				}
			}
		}
		if why != "" {
			out[p.Key()] = why
		}
	}
	return out
}

// Replaced returns the compiled-in plugins an installed one replaces
// (see Installed), each with "replaced by KEY (same method NAME)".
func (r *Registry) Replaced() map[string]string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[string]string, len(r.replaced))
	for k, v := range r.replaced {
		out[k] = v
	}
	return out
}

// Dynamic lets Replace change the methods of the plugins with these keys
// while the host runs (an MCP server's tools). Other plugins' methods
// are fixed: a compiled-in plugin is never swapped by mistake.
func (r *Registry) Dynamic(keys ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		r.dynamic[k] = true
	}
}

// Replace puts p in the place of the registered plugin with p's key, which
// Dynamic must have named: from now on Plugins, Methods and Method give p
// and p's methods (the next runs' stubs and prompts), while what callers
// already hold of the old plugin stays as it was (a run in progress keeps
// its set). Plugins are never changed in place, so readers need no more
// than the registry's lock. The key's state (enabled, turned off, init
// done) carries over; p's init hooks do not run. A method name p shares
// with another plugin is an error and nothing changes. It returns the
// plugin p replaced.
func (r *Registry) Replace(p *plugin.Plugin) (*plugin.Plugin, error) {
	key := p.Key()
	news := pluginhost.Methods(p)
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.find(key)
	if old == nil {
		return nil, fmt.Errorf("no plugin %s in this runtime to replace", key)
	}
	if !r.dynamic[key] {
		return nil, fmt.Errorf("plugin %s has a fixed set of methods: only dynamic plugins (MCP servers) can be replaced", key)
	}
	var errs []error
	seen := map[string]bool{}
	for _, m := range news {
		if seen[m.Name] {
			errs = append(errs, fmt.Errorf("plugin %s mounts method %q twice", key, m.Name))
		}
		seen[m.Name] = true
		if other, ok := r.methods[m.Name]; ok && other.Plugin().Key() != key {
			errs = append(errs, fmt.Errorf("method name %q is mounted by both plugin %s and plugin %s; disable one of them",
				m.Name, other.Plugin().Key(), key))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for name, m := range r.methods {
		if m.Plugin().Key() == key {
			delete(r.methods, name)
		}
	}
	for _, m := range news {
		r.methods[m.Name] = m
	}
	for i := range r.plugins {
		if r.plugins[i] == old {
			r.plugins[i] = p
		}
	}
	return old, nil
}

// Plugins returns the enabled plugins, sorted by key.
func (r *Registry) Plugins() []*plugin.Plugin {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*plugin.Plugin, 0, len(r.plugins))
	for _, p := range r.plugins {
		if _, failed := r.disabled[p.Key()]; !failed && !r.off[p.Key()] && r.replaced[p.Key()] == "" {
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
	reason, failed := r.disabled[key]
	off := r.off[key]
	replaced := r.replaced[key]
	r.mu.RUnlock()
	if replaced != "" {
		return nil, fmt.Errorf("plugin %s is off: %s; it is enabled again once that plugin leaves --plugin-dir", key, replaced)
	}
	if failed {
		return nil, fmt.Errorf("plugin %s is disabled: %s", key, reason)
	}
	if off {
		return nil, fmt.Errorf("plugin %s is disabled by the operator (nekro plugins enable %s)", key, key)
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
		for _, p := range r.plugins {
			if why := r.replaced[p.Key()]; why != "" && slices.ContainsFunc(pluginhost.Methods(p),
				func(m *pluginhost.MethodInfo) bool { return m.Name == name }) {
				return nil, fmt.Errorf("method %q belongs to plugin %s, which is off: %s", name, p.Key(), why)
			}
		}
		return nil, fmt.Errorf("unknown method %q", name)
	}
	if reason, failed := r.disabled[m.Plugin().Key()]; failed {
		return nil, fmt.Errorf("method %q belongs to disabled plugin %s (%s)", name, m.Plugin().Key(), reason)
	}
	if r.off[m.Plugin().Key()] {
		return nil, fmt.Errorf("method %q belongs to plugin %s, which the operator disabled", name, m.Plugin().Key())
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
	out := make(map[string]string, len(r.disabled)+len(r.off))
	for k := range r.off {
		out[k] = "disabled by the operator"
	}
	for k, v := range r.disabled {
		out[k] = v
	}
	for k, v := range r.replaced {
		out[k] = v
	}
	return out
}

// TurnOff marks the plugins the operator turned off, before Init: their
// init hooks wait until they are enabled. Unknown keys are ignored.
func (r *Registry) TurnOff(keys map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range keys {
		r.off[k] = true
	}
}

// Off reports which plugins the operator turned off.
func (r *Registry) Off() map[string]bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[string]bool, len(r.off))
	for k := range r.off {
		out[k] = true
	}
	return out
}

// find returns the registry's plugin with key, or nil; r.mu is held.
func (r *Registry) find(key string) *plugin.Plugin {
	for _, p := range r.plugins {
		if p.Key() == key {
			return p
		}
	}
	return nil
}

// SetEnabled turns the plugin with key on or off while the host runs.
// Turning it on runs its init hooks first if they never ran (a failure
// keeps it off, disabled with the reason, and is returned), then its
// OnEnabled hooks; turning it off hides its methods from prompts, stubs
// and calls at once, then runs its OnDisabled hooks. It reports whether
// the state changed.
func (r *Registry) SetEnabled(ctx context.Context, key string, on bool) (bool, error) {
	r.mu.Lock()
	p := r.find(key)
	if p == nil {
		r.mu.Unlock()
		return false, fmt.Errorf("no plugin %s in this runtime (see --plugins)", key)
	}
	if why := r.replaced[key]; why != "" { // the operator's choice is kept, and has no effect
		if !on {
			r.off[key] = true
			r.mu.Unlock()
			return false, nil
		}
		delete(r.off, key)
		r.mu.Unlock()
		return false, fmt.Errorf("plugin %s stays off: %s", key, why)
	}
	_, failed := r.disabled[key]
	if (on && !r.off[key] && !failed) || (!on && r.off[key]) { // already in that state
		r.mu.Unlock()
		return false, nil
	}
	if !on {
		r.off[key] = true
		r.mu.Unlock()
		r.stateHooks(ctx, p, false)
		return true, nil
	}
	needInit := !r.inited[key] || failed
	r.mu.Unlock()
	if needInit {
		r.mu.Lock()
		delete(r.disabled, key) // a failed init is tried again
		r.mu.Unlock()
		if err := r.initOne(ctx, p); err != nil {
			return false, err
		}
	}
	r.mu.Lock()
	delete(r.off, key)
	r.mu.Unlock()
	r.stateHooks(ctx, p, true)
	return true, nil
}

// stateHooks runs p's OnEnabled or OnDisabled hooks, logging failures.
func (r *Registry) stateHooks(ctx context.Context, p *plugin.Plugin, on bool) {
	enabled, disabled := pluginhost.StateHooks(p)
	hooks, what := disabled, "on-disabled"
	if on {
		hooks, what = enabled, "on-enabled"
	}
	for _, f := range hooks {
		if err := safeHook(func() error { return f(ctx) }); err != nil {
			r.log.Error("plugin "+what+" hook failed", "plugin", p.Key(), "err", err)
		}
	}
}

// Init runs every plugin's init hooks. A plugin whose init fails (or
// panics) has its cleanup run and is disabled, with the reason logged; the
// others keep working.
//
// Plugins the operator turned off wait: their init runs when they are
// enabled.
func (r *Registry) Init(ctx context.Context) {
	for _, p := range r.Plugins() {
		r.initOne(ctx, p)
	}
}

func (r *Registry) initOne(ctx context.Context, p *plugin.Plugin) error {
	inits, _, _ := pluginhost.Hooks(p)
	for _, f := range inits {
		if err := safeHook(func() error { return f(ctx) }); err != nil {
			reason := fmt.Sprintf("init failed: %v", err)
			r.log.Error("plugin disabled", "plugin", p.Key(), "reason", reason)
			r.cleanupOne(context.WithoutCancel(ctx), p)
			r.Disable(p.Key(), reason)
			return fmt.Errorf("plugin %s: %s", p.Key(), reason)
		}
	}
	r.mu.Lock()
	r.inited[p.Key()] = true
	r.mu.Unlock()
	return nil
}

// Cleanup runs the cleanup hooks of every plugin whose init ran (enabled
// or turned off since), logging failures.
func (r *Registry) Cleanup(ctx context.Context) {
	for _, p := range r.All() {
		r.mu.RLock()
		ran := r.inited[p.Key()]
		r.mu.RUnlock()
		if ran {
			r.cleanupOne(ctx, p)
		}
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
func (r *Registry) RenderMethods() string { return RenderMethods(r.Methods()) }

// RenderMethods renders the given methods (a chat's view, in plugin order)
// as RenderMethods does.
func RenderMethods(methods []*pluginhost.MethodInfo) string {
	var b strings.Builder
	for i := 0; i < len(methods); {
		p := methods[i].Plugin()
		j := i
		for j < len(methods) && methods[j].Plugin() == p {
			j++
		}
		fmt.Fprintf(&b, "<plugin name=%q module_name=%q>\n<predefined_methods>\n", p.Meta().Name, p.Meta().ModuleName)
		for _, m := range methods[i:j] {
			b.WriteString(m.PromptEntry(renderMethod))
		}
		b.WriteString("</predefined_methods>\n</plugin>\n")
		i = j
	}
	return b.String()
}

// renderMethod renders one method's entry of RenderMethods: its Python
// signature, whether it ends the run, and its doc, indented.
func renderMethod(m *pluginhost.MethodInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "* %s", pysig.Signature(m))
	if m.Type.EndsRun() {
		b.WriteString(" - **[AGENT METHOD - STOP AFTER CALL]**")
	}
	b.WriteString("\n")
	for _, line := range strings.Split(pysig.Doc(m), "\n") {
		b.WriteString("    " + line + "\n")
	}
	return b.String()
}
