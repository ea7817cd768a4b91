package stub_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/sandbox/stub"
	"github.com/nekro-go/nekro/plugin"
)

// The generated module must be valid Python with real signatures and
// docstrings, whatever the doc text contains; the parameters' tag text
// reaches the docstring's Args block.
func TestAPICallerIsValidPythonWithRealSignatures(t *testing.T) {
	p := plugin.New(plugin.Meta{ModuleName: "m", Author: "a"})
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "find",
		Doc: "Find things.\n\nTricky: \"\"\" and \\n and a trailing quote\""},
		func(*plugin.Ctx, struct {
			Query string   `json:"query" jsonschema:"what to look for, \"quoted\" or not"`
			Limit int      `json:"limit,omitempty" default:"5"`
			Tags  []string `json:"tags,omitempty"`
		}) ([]string, error) {
			return nil, nil
		})
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.MultimodalAgent, Name: "show", Doc: "Show."},
		func(*plugin.Ctx, struct{}) ([]plugin.ContentPart, error) { return nil, nil })
	src, err := stub.APICaller(pluginhost.Methods(p))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "api_caller.py"), src, 0o644)
	out, err := exec.Command("/usr/bin/python3", "-I", "-c", `
import sys, inspect
sys.path.insert(0, sys.argv[1])
import api_caller
print(api_caller.__all__)
print(inspect.signature(api_caller.find))
print(repr(inspect.getdoc(api_caller.find)))
print(inspect.signature(api_caller.show))
`, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s\n%s", err, out, src)
	}
	for _, w := range []string{
		"['NekroError', 'PluginError', 'find', 'show']",
		"(query: 'str', limit: 'int' = 5, tags: 'list[str]' = None) -> 'list[str]'",
		`'Find things.\n\nTricky: """ and \\n and a trailing quote"\n\nArgs:\n    query (str): what to look for, "quoted" or not\n    limit (int)\n    tags (list[str])'`,
		"() -> 'list[dict]'",
	} {
		if !strings.Contains(string(out), w) {
			t.Errorf("python sees\n%s\nwant %q", out, w)
		}
	}
}
