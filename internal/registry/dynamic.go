package registry

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/plugin"
)

// Add puts p among the plugins while the host runs (a Python plugin
// installed into a plugin directory). p is dynamic from then on (Replace,
// Remove). Its init hooks run first, unless off says the operator turned
// its key off (they run when it is enabled); a failed init leaves it
// listed as disabled with the reason, as at start. A key already present
// or a method name another plugin mounts is an error and nothing changes.
func (r *Registry) Add(ctx context.Context, p *plugin.Plugin, off bool) error {
	key := p.Key()
	if err := r.checkNew(p); err != nil {
		return err
	}
	if !off {
		r.initOne(ctx, p) // a failure disables the key, with the reason
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.checkNewLocked(p); err != nil { // another Add won meanwhile
		return err
	}
	for _, m := range pluginhost.Methods(p) {
		r.methods[m.Name] = m
	}
	r.plugins = append(r.plugins, p)
	sort.Slice(r.plugins, func(i, j int) bool { return r.plugins[i].Key() < r.plugins[j].Key() })
	r.dynamic[key] = true
	if off {
		r.off[key] = true
	}
	return nil
}

func (r *Registry) checkNew(p *plugin.Plugin) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.checkNewLocked(p)
}

// checkNewLocked says why p cannot join the registry, if it cannot;
// r.mu is held.
func (r *Registry) checkNewLocked(p *plugin.Plugin) error {
	key := p.Key()
	if r.find(key) != nil {
		return fmt.Errorf("plugin %s is already loaded", key)
	}
	var errs []error
	seen := map[string]bool{}
	for _, m := range pluginhost.Methods(p) {
		if seen[m.Name] {
			errs = append(errs, fmt.Errorf("plugin %s mounts method %q twice", key, m.Name))
		}
		seen[m.Name] = true
		if other, ok := r.methods[m.Name]; ok {
			errs = append(errs, fmt.Errorf("method name %q is mounted by both plugin %s and plugin %s; disable one of them",
				m.Name, other.Plugin().Key(), key))
		}
	}
	return errors.Join(errs...)
}

// Remove takes the dynamic plugin with key out of the registry (a
// Python plugin removed from its directory): its methods leave the next
// runs' stubs, prompts and calls; a run in progress keeps what it holds.
// It returns the plugin and whether its init hooks ran (its cleanup is
// then the caller's to run).
func (r *Registry) Remove(key string) (*plugin.Plugin, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.find(key)
	if p == nil {
		return nil, false, fmt.Errorf("no plugin %s in this runtime to remove", key)
	}
	if !r.dynamic[key] {
		return nil, false, fmt.Errorf("plugin %s is compiled in: only plugins loaded from files can be removed", key)
	}
	for name, m := range r.methods {
		if m.Plugin().Key() == key {
			delete(r.methods, name)
		}
	}
	out := r.plugins[:0]
	for _, q := range r.plugins {
		if q != p {
			out = append(out, q)
		}
	}
	r.plugins = out
	inited := r.inited[key]
	delete(r.inited, key)
	delete(r.disabled, key)
	delete(r.off, key)
	delete(r.dynamic, key)
	return p, inited, nil
}
