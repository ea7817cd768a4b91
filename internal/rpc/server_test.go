package rpc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/registry"
	"github.com/nekro-go/nekro/internal/rpc"
	"github.com/nekro-go/nekro/plugin"
)

// misbehaving is a plugin registered only here: methods that panic, overrun
// their deadline, end the run, and take every kind of argument.
func misbehaving() *plugin.Plugin {
	p := plugin.New(plugin.Meta{ModuleName: "misbehaving", Author: "test"})
	type args struct {
		N    int               `json:"n"`
		S    string            `json:"s,omitempty"`
		L    []float64         `json:"l,omitempty"`
		M    map[string]bool   `json:"m,omitempty"`
		Sub  *struct{ X int }  `json:"sub"`
		Any  any               `json:"any,omitempty"`
		Deep map[string][]uint `json:"deep,omitempty"`
	}
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "typed", Doc: "typed"},
		func(c *plugin.Ctx, a args) (args, error) { return a, nil })
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "panics", Doc: "panics"},
		func(c *plugin.Ctx, _ struct{}) (int, error) { var m map[string]int; m["x"] = 1; return 0, nil })
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "sleepy", Doc: "sleepy", Timeout: 100 * time.Millisecond},
		func(c *plugin.Ctx, _ struct{}) (int, error) { time.Sleep(2 * time.Second); return 1, nil })
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "fails", Doc: "fails"},
		func(c *plugin.Ctx, _ struct{}) (int, error) { return 0, errors.New("the disk is full") })
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "whoami", Doc: "who"},
		func(c *plugin.Ctx, _ struct{}) (string, error) { return c.ChatKey() + "/" + c.UserID(), nil })
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Agent, Name: "finish", Doc: "ends"},
		func(c *plugin.Ctx, _ struct{}) (string, error) { return "done", nil })
	return p
}

type client struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func (c *client) send(line string) map[string]any {
	c.t.Helper()
	if _, err := c.c.Write([]byte(line + "\n")); err != nil {
		c.t.Fatal(err)
	}
	b, err := c.r.ReadBytes('\n')
	if err != nil {
		c.t.Fatalf("read reply to %.80s: %v", line, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		c.t.Fatalf("reply %s: %v", b, err)
	}
	return m
}

func errType(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	if e == nil {
		return ""
	}
	return e["type"].(string) + ": " + e["message"].(string)
}

func start(t *testing.T) (*rpc.Server, *client) {
	t.Helper()
	reg, err := registry.New([]*plugin.Plugin{misbehaving()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "rpc.sock")
	env := &pluginhost.RunEnv{RunInfo: plugin.RunInfo{ChatKey: "chat-1", UserID: "u1"}}
	srv, err := rpc.Listen(context.Background(), sock, rpc.Config{Env: env, Methods: reg, MaxRequest: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, &client{t: t, c: c, r: bufio.NewReader(c)}
}

func TestBadRequestsGetClearErrorsAndTheServerKeepsServing(t *testing.T) {
	srv, c := start(t)
	cases := []struct{ req, want string }{
		{`{"id":1,"method":"nope","args":{}}`, `unknown_method: nope(): unknown method "nope"`},
		{`{"id":2,"method":"typed","args":{"n":`, "bad_request: malformed request"},
		{`not json at all`, "bad_request: malformed request"},
		{`{"id":3,"method":"typed","args":{"n":"7"}}`, `argument: typed(): argument 'n' must be int, got str ("7")`},
		{`{"id":4,"method":"typed","args":{}}`, `argument: typed(): argument 'n' is missing (expected int)`},
		{`{"id":5,"method":"typed","args":{"n":1,"zzz":1}}`, `argument: typed(): got an unexpected argument 'zzz'`},
		{`{"id":6,"method":"typed","args":{"n":1,"l":[1,"x"]}}`, `argument: typed(): argument 'l' item [1] must be float, got str`},
		{`{"id":7,"method":"typed","args":{"n":1,"sub":{"X":1,"Y":1}}}`, `argument: typed(): argument 'sub' has an unexpected key "Y"`},
		{`{"id":8,"method":"typed","args":{"n":1,"deep":{"a":[-1]}}}`, `argument: typed(): argument 'deep' key "a" item [0] must be a non-negative int`},
		{`{"id":9,"method":"typed","args":{"n":99999999999999999999}}`, `argument: typed(): argument 'n' must be an int that fits in 64 bits`},
		{`{"id":10,"method":"panics","args":{}}`, "panic: panics(): the plugin method failed with an internal error (panic: assignment to entry in nil map)"},
		{`{"id":11,"method":"sleepy","args":{}}`, "timeout: sleepy(): the method did not answer within 100ms"},
		{`{"id":12,"method":"typed","args":{"n":1,"s":"` + strings.Repeat("x", 2<<20) + `"}}`, "too_large: request larger than the 1 MiB limit"},
		{`{"id":13,"method":"typed","args":{"n":1,"any":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}}`,
			"bad_request: malformed request: arrays and objects nested more than 64 levels deep"},
		{`{"id":14,"method":"typed","args":{"n":1,"any":{"k":` + strings.Repeat(`{"k":`, 62) + "1" + strings.Repeat("}", 63) + `}}`,
			"bad_request: malformed request: arrays and objects nested more than 64 levels deep"},
	}
	for _, tc := range cases {
		got := errType(c.send(tc.req))
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("request %.60s:\n got %q\nwant prefix %q", tc.req, got, tc.want)
		}
	}
	// Still serving on the same connection, with the run's identity.
	r := c.send(`{"id":20,"method":"typed","args":{"n":5,"l":[1.5,2],"m":{"a":true},"sub":{"X":3},"any":[null,{"k":1}],"deep":{"a":[1,2]}}}`)
	if errType(r) != "" {
		t.Fatalf("good call failed: %v", r)
	}
	res := r["result"].(map[string]any)
	if res["n"].(float64) != 5 || res["sub"].(map[string]any)["X"].(float64) != 3 {
		t.Errorf("result %v", res)
	}
	if r := c.send(`{"id":21,"method":"whoami","args":{},"chat_key":"other","user":"evil"}`); r["result"] != "chat-1/u1" {
		t.Errorf("identity from the request: %v", r)
	}
	// Brackets inside strings (escaped quotes too) are text, not nesting.
	brackets := strings.Repeat(`[{\"`, 100)
	if r := c.send(`{"id":22,"method":"typed","args":{"n":1,"s":"` + brackets + `"}}`); errType(r) != "" {
		t.Errorf("brackets in a string counted as nesting: %v", r)
	}
	if n := len(srv.Calls()); n != 13 {
		t.Errorf("recorded %d calls, want 13 (malformed, oversized and too deep requests are not calls)", n)
	}
}

func TestAnEndingCallEndsTheRun(t *testing.T) {
	srv, c := start(t)
	if r := c.send(`{"id":1,"method":"finish","args":{}}`); r["result"] != "done" {
		t.Fatalf("finish: %v", r)
	}
	if got := errType(c.send(`{"id":2,"method":"whoami","args":{}}`)); !strings.HasPrefix(got, "run_ended:") {
		t.Errorf("call after the agent method: %q", got)
	}
	e := srv.Ending()
	if e == nil || e.Method != "finish" || e.Type != plugin.Agent || string(e.Result) != `"done"` {
		t.Errorf("ending %+v", e)
	}
}

func TestCloseEndsCallsInFlight(t *testing.T) {
	srv, c := start(t)
	done := make(chan map[string]any)
	go func() {
		c.c.Write([]byte(`{"id":1,"method":"sleepy","args":{}}` + "\n"))
		b, _ := c.r.ReadBytes('\n')
		var m map[string]any
		json.Unmarshal(b, &m)
		done <- m
	}()
	time.Sleep(20 * time.Millisecond)
	start := time.Now()
	srv.Close()
	<-done
	if time.Since(start) > time.Second {
		t.Errorf("Close waited %s for a plugin that ignores its context", time.Since(start))
	}
}
