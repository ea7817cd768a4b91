package plugin_test

import (
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/plugin"
)

func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		v := recover()
		if v == nil {
			t.Errorf("no panic, want one containing %q", want)
			return
		}
		if !strings.Contains(v.(string), want) {
			t.Errorf("panic %q, want it to contain %q", v, want)
		}
	}()
	f()
}

func newP() *plugin.Plugin {
	return plugin.New(plugin.Meta{ModuleName: "m", Author: "a"})
}

func TestRegistrationMistakesPanic(t *testing.T) {
	doc := "Does things."
	mustPanic(t, "module name", func() { plugin.New(plugin.Meta{ModuleName: "bad-name", Author: "a"}) })
	mustPanic(t, "author", func() { plugin.New(plugin.Meta{ModuleName: "ok", Author: "1x"}) })
	mustPanic(t, "must be a Python identifier", func() {
		plugin.MountSandboxMethod(newP(), plugin.Method{Type: plugin.Tool, Name: "class", Doc: doc},
			func(*plugin.Ctx, struct{}) (int, error) { return 0, nil })
	})
	mustPanic(t, "must be a Python identifier", func() {
		plugin.MountSandboxMethod(newP(), plugin.Method{Type: plugin.Tool, Name: "_private", Doc: doc},
			func(*plugin.Ctx, struct{}) (int, error) { return 0, nil })
	})
	mustPanic(t, "AGENT methods must return a string", func() {
		plugin.MountSandboxMethod(newP(), plugin.Method{Type: plugin.Agent, Name: "a", Doc: doc},
			func(*plugin.Ctx, struct{}) (int, error) { return 0, nil })
	})
	mustPanic(t, "BEHAVIOR methods must return a string", func() {
		plugin.MountSandboxMethod(newP(), plugin.Method{Type: plugin.Behavior, Name: "a", Doc: doc},
			func(*plugin.Ctx, struct{}) (bool, error) { return true, nil })
	})
	mustPanic(t, "MULTIMODAL_AGENT methods must return []plugin.ContentPart", func() {
		plugin.MountSandboxMethod(newP(), plugin.Method{Type: plugin.MultimodalAgent, Name: "a", Doc: doc},
			func(*plugin.Ctx, struct{}) (string, error) { return "", nil })
	})
	mustPanic(t, "TOOL result chan int is not JSON-encodable", func() {
		plugin.MountSandboxMethod(newP(), plugin.Method{Type: plugin.Tool, Name: "a", Doc: doc},
			func(*plugin.Ctx, struct{}) (chan int, error) { return nil, nil })
	})
	mustPanic(t, "must be a struct", func() {
		plugin.MountSandboxMethod(newP(), plugin.Method{Type: plugin.Tool, Name: "a", Doc: doc},
			func(*plugin.Ctx, int) (int, error) { return 0, nil })
	})
	mustPanic(t, `required parameter "b" follows optional "a"`, func() {
		plugin.MountSandboxMethod(newP(), plugin.Method{Type: plugin.Tool, Name: "a", Doc: doc},
			func(*plugin.Ctx, struct {
				A *int `json:"a"`
				B int  `json:"b"`
			}) (int, error) {
				return 0, nil
			})
	})
	mustPanic(t, "Doc is empty", func() {
		plugin.MountSandboxMethod(newP(), plugin.Method{Type: plugin.Tool, Name: "a"},
			func(*plugin.Ctx, struct{}) (int, error) { return 0, nil })
	})
	mustPanic(t, "map keys must be strings", func() {
		plugin.MountSandboxMethod(newP(), plugin.Method{Type: plugin.Tool, Name: "a", Doc: doc},
			func(*plugin.Ctx, struct {
				M map[int]string `json:"m"`
			}) (int, error) {
				return 0, nil
			})
	})
	mustPanic(t, "default 1.5", func() {
		plugin.MountSandboxMethod(newP(), plugin.Method{Type: plugin.Tool, Name: "a", Doc: doc},
			func(*plugin.Ctx, struct {
				N int `json:"n,omitempty" default:"1.5"`
			}) (int, error) {
				return 0, nil
			})
	})
	p := newP()
	mount := func() {
		plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "twice", Doc: doc},
			func(*plugin.Ctx, struct{}) (int, error) { return 0, nil })
	}
	mount()
	mustPanic(t, "mounted twice", mount)
}

func TestParamsFollowTheArgsStruct(t *testing.T) {
	p := newP()
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "f", Doc: "d"},
		func(*plugin.Ctx, struct {
			Query  string            `json:"query" jsonschema:"what to look for"`
			Limit  int               `json:"limit,omitempty" default:"10"`
			Tags   []string          `json:"tags,omitempty"`
			Weight *float64          `json:"weight"`
			Opts   map[string]bool   `json:"opts,omitempty" default:"{\"fast\": true}"`
			hidden int               //nolint:unused // unexported: not a parameter
			Skip   string            `json:"-"`
			Extra  map[string][]byte `json:"extra,omitempty"`
		}) (map[string]any, error) {
			return nil, nil
		})
	var got []string
	for _, pr := range pluginhost.Methods(p)[0].Params() {
		s := pr.Name + ": " + pr.PyType
		if pr.Optional {
			s += " = " + pr.DefaultPy
		}
		got = append(got, s)
	}
	want := "query: str|limit: int = 10|tags: list[str] = None|weight: Optional[float] = None|opts: dict[str, bool] = {\"fast\": True}|extra: dict[str, bytes] = None"
	if strings.Join(got, "|") != want {
		t.Errorf("params\n got %s\nwant %s", strings.Join(got, "|"), want)
	}
	if d := pluginhost.Methods(p)[0].Params()[0].Doc; d != "what to look for" {
		t.Errorf("doc %q", d)
	}
	if r := pluginhost.Methods(p)[0].ResultPyType(); r != "dict[str, Any]" {
		t.Errorf("result hint %q", r)
	}
}
