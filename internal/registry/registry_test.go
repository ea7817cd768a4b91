package registry_test

import (
	"context"
	"errors"
	"fmt"
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

// Replace swaps a dynamic plugin's methods for the next lookups while what
// a caller holds stays as it was; it refuses fixed plugins, clashes with
// another plugin's names, and keeps the key's operator state. Concurrent
// readers see the old set or the new one (go test -race).
func TestReplaceSwapsADynamicPluginsMethods(t *testing.T) {
	old := withMethod("mcp", "srv", "srv_a", plugin.Tool)
	other := withMethod("a", "other", "taken", plugin.Tool)
	r, err := registry.New([]*plugin.Plugin{old, other}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Init(context.Background())
	held := r.Methods()
	if _, err := r.Replace(withMethod("mcp", "srv", "srv_b", plugin.Tool)); err == nil || !strings.Contains(err.Error(), "fixed set of methods") {
		t.Fatalf("a plugin not marked dynamic was replaced: %v", err)
	}
	r.Dynamic("mcp.srv")
	if _, err := r.Replace(withMethod("mcp", "srv", "taken", plugin.Tool)); err == nil || !strings.Contains(err.Error(), "a.other") {
		t.Fatalf("a clash with another plugin's method: %v", err)
	}
	if _, err := r.Method("srv_a"); err != nil {
		t.Fatalf("a refused replacement changed the registry: %v", err)
	}

	stop := make(chan struct{})
	readers := make(chan struct{})
	go func() {
		defer close(readers)
		for {
			select {
			case <-stop:
				return
			default:
			}
			ms := r.Methods()
			if len(ms) != 2 || r.RenderMethods() == "" {
				t.Errorf("a reader saw %d methods", len(ms))
				return
			}
		}
	}()
	repl := withMethod("mcp", "srv", "srv_b", plugin.Tool)
	if got, err := r.Replace(repl); err != nil || got != old {
		t.Fatalf("replace: %v (returned %v)", err, got)
	}
	close(stop)
	<-readers
	if _, err := r.Method("srv_a"); err == nil {
		t.Error("the replaced plugin's method is still found")
	}
	if m, err := r.Method("srv_b"); err != nil || m.Plugin() != repl {
		t.Errorf("the new method: %v", err)
	}
	if p, err := r.Plugin("mcp.srv"); err != nil || p != repl {
		t.Errorf("Plugin(mcp.srv) after replace: %v", err)
	}
	var names []string
	for _, m := range held {
		names = append(names, m.Plugin().Key()+":"+m.Name)
	}
	if strings.Join(names, ",") != "a.other:taken,mcp.srv:srv_a" {
		t.Errorf("what a caller held changed: %v", names)
	}
	if _, err := r.SetEnabled(context.Background(), "mcp.srv", false); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Replace(withMethod("mcp", "srv", "srv_c", plugin.Tool)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Method("srv_c"); err == nil || !strings.Contains(err.Error(), "operator disabled") {
		t.Errorf("a turned-off plugin came back on by being replaced: %v", err)
	}
}

// An installed plugin (a --plugin-dir Python plugin) that mounts a
// method or command name a compiled-in plugin mounts replaces it whole:
// the compiled-in one is off with the reason, its methods are out and
// refused by name, enabling it is refused; two installed plugins that
// clash are still an error.
func TestInstalledPluginReplacesABuiltin(t *testing.T) {
	builtin := withMethod("nekro", "dice", "dice_roll", plugin.Agent)
	plugin.MountSandboxMethod(builtin, plugin.Method{Type: plugin.Tool, Name: "probability_wheel", Doc: "Spin."},
		func(*plugin.Ctx, struct{}) (string, error) { return "", nil })
	mine := withMethod("tester", "dicey", "dice_roll", plugin.Tool)
	cmdBuiltin := withMethod("nekro", "locks", "lock_state", plugin.Tool)
	plugin.MountCommand(cmdBuiltin, plugin.Command{Name: "lock"}, func(*plugin.Ctx, struct{}) (string, error) { return "", nil })
	cmdMine := withMethod("tester", "locker", "locker_state", plugin.Tool)
	plugin.MountCommand(cmdMine, plugin.Command{Name: "bolt", Aliases: []string{"lock"}}, func(*plugin.Ctx, struct{}) (string, error) { return "", nil })
	other := withMethod("nekro", "other", "other_method", plugin.Tool)

	r, err := registry.New([]*plugin.Plugin{builtin, mine, cmdBuiltin, cmdMine, other}, nil,
		registry.Installed("tester.dicey", "tester.locker"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"nekro.dice": "replaced by tester.dicey (same method dice_roll)",
		"nekro.locks": "replaced by tester.locker (same command /lock)"}
	if got := r.Replaced(); len(got) != 2 || got["nekro.dice"] != want["nekro.dice"] || got["nekro.locks"] != want["nekro.locks"] {
		t.Errorf("Replaced() = %v, want %v", got, want)
	}
	if got := r.Disabled()["nekro.dice"]; got != want["nekro.dice"] {
		t.Errorf("Disabled()[nekro.dice] = %q", got)
	}
	var keys []string
	for _, p := range r.Plugins() {
		keys = append(keys, p.Key())
	}
	if strings.Join(keys, " ") != "nekro.other tester.dicey tester.locker" {
		t.Errorf("enabled: %v", keys)
	}
	if len(r.All()) != 5 {
		t.Errorf("All() lists %d plugins, want the 5 (replaced ones too)", len(r.All()))
	}
	if m, err := r.Method("dice_roll"); err != nil || m.Plugin() != mine {
		t.Errorf("dice_roll: %v, %v; want the installed plugin's", m, err)
	}
	if _, err := r.Method("probability_wheel"); err == nil || !strings.Contains(err.Error(), "replaced by tester.dicey") {
		t.Errorf("the replaced plugin's other method: %v", err)
	}
	if _, err := r.Plugin("nekro.dice"); err == nil || !strings.Contains(err.Error(), "replaced by tester.dicey") {
		t.Errorf("Plugin(nekro.dice): %v", err)
	}
	if ok, err := r.SetEnabled(context.Background(), "nekro.dice", true); ok || err == nil || !strings.Contains(err.Error(), "stays off") {
		t.Errorf("enabling a replaced plugin: %v, %v", ok, err)
	}
	if ok, err := r.SetEnabled(context.Background(), "nekro.dice", false); ok || err != nil || !r.Off()["nekro.dice"] {
		t.Errorf("turning a replaced plugin off: %v, %v (the operator's choice is kept)", ok, err)
	}

	// Without Installed, or between two installed plugins, a clash is an error.
	if _, err := registry.New([]*plugin.Plugin{builtin, mine}, nil); err == nil {
		t.Error("a clash with no installed plugin was accepted")
	}
	twin := withMethod("tester", "twin", "dice_roll", plugin.Tool)
	if _, err := registry.New([]*plugin.Plugin{builtin, mine, twin}, nil, registry.Installed("tester.dicey", "tester.twin")); err == nil ||
		!strings.Contains(err.Error(), "tester.dicey") || !strings.Contains(err.Error(), "tester.twin") {
		t.Errorf("two installed plugins clashing: %v", err)
	}
}

// BenchmarkRenderMethods renders the method list of 20 plugins with a
// method each, as every turn's prompt does.
func BenchmarkRenderMethods(b *testing.B) {
	var ps []*plugin.Plugin
	for i := range 20 {
		ps = append(ps, withMethod("bench", fmt.Sprintf("p%d", i), fmt.Sprintf("method_%d", i), plugin.Tool))
	}
	r, err := registry.New(ps, nil)
	if err != nil {
		b.Fatal(err)
	}
	methods := r.Methods()
	for b.Loop() {
		registry.RenderMethods(methods)
	}
}
