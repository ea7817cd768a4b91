package server_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/server"
	"github.com/nekro-go/nekro/internal/testutil"
	"github.com/nekro-go/nekro/plugin"
)

// A Go plugin with settings, as a plugin author declares them.
type greeterSettings struct {
	Greeting string `json:"greeting" title:"Greeting" description:"what the bot says first"`
	Token    string `json:"token" title:"Token" secret:"true"`
	Times    int    `json:"times" min:"1" max:"5"`
}

var greeter = func() *plugin.Plugin {
	p := plugin.New(plugin.Meta{Name: "Greeter", ModuleName: "greeter", Author: "tester", Version: "1.0.0"})
	settings := plugin.MountConfig(p, greeterSettings{Greeting: "hello", Times: 1})
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "greet", Description: "Greet.", Doc: "Greet as the settings say."},
		func(ctx *plugin.Ctx, _ struct{}) (string, error) {
			s := settings.Get()
			if ctx.Config().(greeterSettings) != s {
				return "", fmt.Errorf("ctx.Config() and settings.Get() differ")
			}
			return strings.Repeat(s.Greeting+" ", s.Times) + fmt.Sprint(s.Token != ""), nil
		})
	return p
}()

// The settings of a Go plugin and of a Python plugin (ConfigBase with
// pydantic fields) through the API, `nekro plugins config` and a hand
// edit of config.yaml, all while nekro serve runs: each change is in
// force for the next call, no restart; bad values are refused naming the
// field; secrets never come back.
func TestPluginSettingsChangeWhileServing(t *testing.T) {
	e := startEnv(t, nil, func(o *server.Options) {
		o.App.PluginDirs = []string{filepath.Join("..", "pyplugin", "testdata", "plugins")}
		o.App.Runtime.Plugins = append(pluginhost.Registered(), greeter)
	})
	both := func() string {
		t.Helper()
		var res struct {
			Output   string `json:"output"`
			StopType string `json:"stop_type"`
		}
		if st := e.call("POST", "/api/chats/c1/exec", map[string]string{"code": "print(greet())\nprint(weather_settings())"}, &res); st != http.StatusOK {
			t.Fatalf("exec: %d %+v", st, res)
		}
		return strings.TrimSpace(res.Output)
	}
	if got := both(); got != "hello false\nno-key 10 metric Paris" {
		t.Fatalf("defaults: %q", got)
	}

	var list struct {
		Plugins []struct {
			Key     string `json:"key"`
			Enabled bool   `json:"enabled"`
			Methods []struct {
				Name, Type, Signature, Doc string
			} `json:"methods"`
			Config *struct {
				Values map[string]any `json:"values"`
				Schema map[string]any `json:"schema"`
			} `json:"config"`
		} `json:"plugins"`
	}
	if st := e.call("GET", "/api/plugins", nil, &list); st != http.StatusOK {
		t.Fatalf("GET /api/plugins: %d", st)
	}
	seen := 0
	for _, p := range list.Plugins {
		switch p.Key {
		case "tester.pyweather":
			seen++
			if !p.Enabled || p.Config == nil || len(p.Methods) != 1 || p.Methods[0].Signature != "weather_settings() -> str" {
				t.Errorf("pyweather: %+v", p)
			}
			props := p.Config.Schema["properties"].(map[string]any)
			timeout := props["TIMEOUT"].(map[string]any)
			if timeout["type"] != "integer" || timeout["maximum"] != 60.0 || props["API_KEY"].(map[string]any)["x-secret"] != true {
				t.Errorf("pyweather schema: %v", props)
			}
			if units := props["UNITS"].(map[string]any)["enum"]; fmt.Sprint(units) != "[metric imperial]" {
				t.Errorf("UNITS choices %v", units)
			}
		case "tester.greeter":
			seen++
			if p.Config == nil || p.Config.Values["greeting"] != "hello" {
				t.Errorf("greeter: %+v", p)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("GET /api/plugins lacks the test plugins: %+v", list)
	}

	// The API.
	var errOut struct{ Error, Field string }
	if st := e.call("PUT", "/api/plugins/tester.greeter/config", map[string]any{"times": 9}, &errOut); st != http.StatusBadRequest || errOut.Field != "times" {
		t.Errorf("times 9: %d %+v", st, errOut)
	}
	if st := e.call("PUT", "/api/plugins/tester.pyweather/config", map[string]any{"COLOUR": "red"}, &errOut); st != http.StatusBadRequest ||
		!strings.Contains(errOut.Error, "setting COLOUR: no such setting") {
		t.Errorf("unknown field: %d %+v", st, errOut)
	}
	if st := e.call("PUT", "/api/plugins/tester.pynotes/config", map[string]any{}, nil); st != http.StatusNotFound {
		t.Errorf("a plugin without settings: %d", st)
	}
	var cfg struct {
		Values map[string]any `json:"values"`
	}
	if st := e.call("PUT", "/api/plugins/tester.greeter/config", map[string]any{"greeting": "hi", "times": 2, "token": "s3cret"}, &cfg); st != http.StatusOK {
		t.Fatalf("PUT greeter: %d", st)
	}
	if cfg.Values["token"] != "********" {
		t.Errorf("the secret came back: %v", cfg.Values)
	}
	if st := e.call("PUT", "/api/plugins/tester.pyweather/config", map[string]any{"UNITS": "imperial", "CITIES": []string{"Oslo", "Lima"}}, nil); st != http.StatusOK {
		t.Fatalf("PUT pyweather: %d", st)
	}
	if got := both(); got != "hi hi true\nno-key 10 imperial Oslo,Lima" {
		t.Fatalf("after PUT: %q", got)
	}
	// Sending the mask back keeps the secret.
	e.call("PUT", "/api/plugins/tester.greeter/config", map[string]any{"token": "********", "times": 1}, nil)
	if got := both(); !strings.HasPrefix(got, "hi true") {
		t.Fatalf("after a masked PUT: %q", got)
	}

	// The command line, next to the running server.
	r := testutil.RunNekro(t, nil, "--data", e.dataDir, "--plugin-dir", filepath.Join("..", "pyplugin", "testdata", "plugins"),
		"plugins", "config", "tester.pyweather", "--set", "TIMEOUT=30", "--set", "API_KEY=k")
	if r.Code != 0 || !strings.Contains(r.Stdout, `API_KEY  "********"`) || !strings.Contains(r.Stdout, "TIMEOUT  30") {
		t.Fatalf("plugins config --set: %+v", r)
	}
	r = testutil.RunNekro(t, nil, "--data", e.dataDir, "--plugin-dir", filepath.Join("..", "pyplugin", "testdata", "plugins"),
		"plugins", "config", "tester.pyweather", "--set", "TIMEOUT=0")
	if r.Code == 0 || !strings.Contains(r.Stderr, "setting TIMEOUT: must be at least 1") {
		t.Errorf("TIMEOUT=0: %+v", r)
	}
	waitFor(t, both, "hi true\nkey-set 30 imperial Oslo,Lima")

	// A hand edit of the file.
	path := filepath.Join(e.dataDir, "plugins", "tester.greeter", "config.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "# Greeting: what the bot says first\ngreeting: hi") {
		t.Errorf("config.yaml:\n%s", b)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), "greeting: hi", "greeting: ahoy", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, both, "ahoy true\nkey-set 30 imperial Oslo,Lima")
}

// waitFor calls f until it returns want (a change made outside the server
// is seen within about a second).
func waitFor(t *testing.T, f func() string, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := f()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %q, want %q", got, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
