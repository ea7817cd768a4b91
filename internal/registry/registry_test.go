package registry_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/registry"
	"github.com/nekro-go/nekro/plugin"
)

func withMethod(author, module, name string, t plugin.MethodType) *plugin.Plugin {
	p := plugin.New(plugin.Meta{ModuleName: module, Author: author, Name: module})
	plugin.MountSandboxMethod(p, plugin.Method{Type: t, Name: name, Doc: "Summary of " + name + ".\n\nArgs:\n    x (int): a number."},
		func(*plugin.Ctx, struct {
			X int `json:"x"`
		}) (string, error) {
			return "", nil
		})
	return p
}

func TestNameClashNamesBothPlugins(t *testing.T) {
	_, err := registry.New([]*plugin.Plugin{withMethod("alice", "one", "search", plugin.Tool), withMethod("bob", "two", "search", plugin.Tool)}, nil)
	if err == nil || !strings.Contains(err.Error(), "alice.one") || !strings.Contains(err.Error(), "bob.two") {
		t.Fatalf("clash error %v, want both plugin keys", err)
	}
}

func TestRenderMethodsMarksAgentMethods(t *testing.T) {
	r, err := registry.New([]*plugin.Plugin{withMethod("a", "tools", "lookup", plugin.Tool), withMethod("a", "agents", "ask", plugin.Agent)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := r.RenderMethods()
	for _, w := range []string{
		`<plugin name="agents" module_name="agents">`,
		"* ask(x: int) -> str - **[AGENT METHOD - STOP AFTER CALL]**\n    Summary of ask.",
		"* lookup(x: int) -> str\n    Summary of lookup.\n    \n    Args:\n        x (int): a number.",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("render lacks %q:\n%s", w, out)
		}
	}
	if strings.Index(out, "agents") > strings.Index(out, "tools") {
		t.Errorf("plugins not in stable key order:\n%s", out)
	}
}

func TestFailingInitDisablesOnlyThatPlugin(t *testing.T) {
	bad := withMethod("a", "bad", "bad_method", plugin.Tool)
	good := withMethod("a", "good", "good_method", plugin.Tool)
	cleaned := false
	bad.OnInit(func(context.Context) error { return errors.New("no model file") })
	bad.OnCleanup(func(context.Context) error { cleaned = true; return nil })
	panicky := withMethod("a", "panicky", "p_method", plugin.Tool)
	panicky.OnInit(func(context.Context) error { panic("oops") })
	r, err := registry.New([]*plugin.Plugin{bad, good, panicky}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Init(context.Background())
	if !cleaned {
		t.Error("cleanup did not run after the failed init")
	}
	if _, err := r.Method("bad_method"); err == nil || !strings.Contains(err.Error(), "no model file") {
		t.Errorf("method of the failed plugin: %v", err)
	}
	if _, err := r.Method("p_method"); err == nil || !strings.Contains(err.Error(), "panic: oops") {
		t.Errorf("method of the panicking plugin: %v", err)
	}
	if _, err := r.Method("good_method"); err != nil {
		t.Errorf("good plugin lost: %v", err)
	}
	if len(r.Methods()) != 1 {
		t.Errorf("callable methods %d, want 1", len(r.Methods()))
	}
}

func TestChannelResetRunsEveryPlugin(t *testing.T) {
	var seen []string
	a := withMethod("a", "x", "m1", plugin.Tool)
	b := withMethod("a", "y", "m2", plugin.Tool)
	a.OnChannelReset(func(_ context.Context, chat string) error {
		seen = append(seen, "x:"+chat)
		return errors.New("x failed")
	})
	b.OnChannelReset(func(_ context.Context, chat string) error { seen = append(seen, "y:"+chat); return nil })
	r, _ := registry.New([]*plugin.Plugin{a, b}, nil)
	err := r.ChannelReset(context.Background(), "c1")
	if strings.Join(seen, ",") != "x:c1,y:c1" || err == nil || !strings.Contains(err.Error(), "a.x") {
		t.Errorf("seen %v err %v", seen, err)
	}
}
