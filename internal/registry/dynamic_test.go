package registry_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/registry"
	"github.com/nekro-go/nekro/plugin"
)

// A plugin added while the host runs has its init run and its methods
// callable, is refused on a clashing method name, can then be replaced
// and removed (it is dynamic), and a compiled-in plugin cannot be
// removed.
func TestAddAndRemoveDynamicPlugins(t *testing.T) {
	fixed := withMethod("a", "fixed", "fixed_method", plugin.Tool)
	r, err := registry.New([]*plugin.Plugin{fixed}, nil)
	if err != nil {
		t.Fatal(err)
	}
	added := withMethod("a", "added", "added_method", plugin.Tool)
	inited := false
	added.OnInit(func(context.Context) error { inited = true; return nil })
	if err := r.Add(context.Background(), added, false); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Method("added_method"); err != nil || !inited {
		t.Fatalf("added plugin: method %v, init ran %v", err, inited)
	}
	clash := withMethod("b", "clash", "fixed_method", plugin.Tool)
	if err := r.Add(context.Background(), clash, false); err == nil || !strings.Contains(err.Error(), "a.fixed") {
		t.Errorf("a clashing method name: want an error naming a.fixed, got %v", err)
	}
	if _, err := r.Replace(withMethod("a", "added", "added_method2", plugin.Tool)); err != nil {
		t.Errorf("an added plugin is dynamic: %v", err)
	}
	p, ran, err := r.Remove("a.added")
	if err != nil || p == nil || !ran {
		t.Fatalf("remove: %v %v %v", p, ran, err)
	}
	if _, err := r.Method("added_method2"); err == nil {
		t.Error("a removed plugin's method is still callable")
	}
	if _, _, err := r.Remove("a.fixed"); err == nil {
		t.Error("a compiled-in plugin was removed")
	}
	if len(r.All()) != 1 {
		t.Errorf("plugins after removal: %d", len(r.All()))
	}
}
