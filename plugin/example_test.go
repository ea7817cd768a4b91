package plugin_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/pysig"
	"github.com/nekro-go/nekro/plugin"
)

// SumArgs are my_sum_function's parameters, in Python order.
type SumArgs struct {
	Num1  int     `json:"num1" jsonschema:"the first addend"`
	Num2  int     `json:"num2" jsonschema:"the second addend"`
	Note  *string `json:"note"`                        // pointer or omitempty: optional, default None
	Times int     `json:"times,omitempty" default:"1"` // optional with a default
}

// The README's quick start: a plugin with one TOOL method, and what the
// AI's code and the model see of it. In a plugin package, New and
// MountSandboxMethod go in a package variable and init, with
// plugin.Register(p) last.
func Example() {
	p := plugin.New(plugin.Meta{Name: "Calculator", ModuleName: "calc", Author: "alice",
		Version: "1.0.0", Description: "Arithmetic", URL: "https://example.org"})
	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "my_sum_function", Description: "Adds two integers.",
		Doc: "Add two integers.\n\nReturns:\n    int: the sum.\n\nExample:\n    my_sum_function(2, 3)",
	}, func(ctx *plugin.Ctx, a SumArgs) (int, error) { return (a.Num1 + a.Num2) * a.Times, nil })

	m := pluginhost.Methods(p)[0]
	fmt.Println(pysig.Signature(m))
	fmt.Println(pysig.Doc(m))
	// The code calls my_sum_function(2, 3); the host runs the Go function.
	out, err := pluginhost.Call(m, pluginhost.NewCtx(context.Background(), p, nil),
		map[string]json.RawMessage{"num1": json.RawMessage("2"), "num2": json.RawMessage("3")})
	fmt.Println(string(out), err)
	// Output:
	// my_sum_function(num1: int, num2: int, note: Optional[str] = None, times: int = 1) -> int
	// Add two integers.
	//
	// Args:
	//     num1 (int): the first addend
	//     num2 (int): the second addend
	//     note (Optional[str])
	//     times (int)
	//
	// Returns:
	//     int: the sum.
	//
	// Example:
	//     my_sum_function(2, 3)
	// 5 <nil>
}

// A method keeps state in the KV store, scoped to the run's chat, user or
// the plugin; Set reports whether it created or updated the value.
func ExampleStore() {
	p := plugin.New(plugin.Meta{ModuleName: "counter", Author: "alice"})
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "count_visit", Doc: "Count the user's visits."},
		func(ctx *plugin.Ctx, _ struct{}) (int, error) {
			n := 0
			_, err := ctx.Store().Update(ctx, ctx.UserScope(), "visits", func(cur string, found bool) (string, error) {
				if found {
					fmt.Sscan(cur, &n)
				}
				n++
				return fmt.Sprint(n), nil
			})
			return n, err
		})
	_ = p // plugin.Register(p) in init()
}

// Files the AI names go through the plugin's data directory as an
// os.Root: "../x" or "/etc/x" is an error, not a write elsewhere.
func ExamplePlugin_DataRoot() {
	p := plugin.New(plugin.Meta{ModuleName: "notes", Author: "alice"})
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Behavior, Name: "save_note", Doc: "Save a note."},
		func(ctx *plugin.Ctx, a struct {
			Name string `json:"name" jsonschema:"a plain file name"`
			Text string `json:"text" jsonschema:"the note"`
		}) (string, error) {
			root, err := p.DataRoot()
			if err != nil {
				return "", err
			}
			defer root.Close()
			if err := root.WriteFile(a.Name, []byte(a.Text), 0o644); err != nil {
				return "", err
			}
			return "saved " + a.Name, nil
		})
}
