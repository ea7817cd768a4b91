package stub_test

import (
	"bufio"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// A call encodes and decodes as json.dumps and json.loads would, through a
// plain connection, without importing the socket and json modules (with
// what they import, about as much CPU as a fresh interpreter's start).
func TestCallsNeedNeitherSocketNorJSONModules(t *testing.T) {
	p := plugin.New(plugin.Meta{ModuleName: "m", Author: "a"})
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "find", Doc: "Find."},
		func(*plugin.Ctx, struct {
			Query any `json:"query"`
		}) (any, error) {
			return nil, nil
		})
	src, err := stub.APICaller(pluginhost.Methods(p))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "api_caller.py"), src, 0o644)
	sock := filepath.Join(dir, "rpc.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 2)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		for _, reply := range []string{`{"id":1,"result":{"found":["é",1.5,null]}}`, `{"id":2,"error":{"type":"plugin","message":"no"}}`} {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			got <- line
			// The reply in two writes: the reader joins them.
			io.WriteString(c, reply[:7])
			time.Sleep(10 * time.Millisecond)
			io.WriteString(c, reply[7:]+"\n")
		}
	}()
	out, err := exec.Command("/usr/bin/python3", "-I", "-S", "-c", `
import sys
sys.path.insert(0, sys.argv[1])
import api_caller
api_caller._SOCKET_PATH = sys.argv[2]
print("RESULT", api_caller.find({"q": ["é\n", 2, 2.5, True, None, b"\x00"]}))
try:
    api_caller.find(1)
except api_caller.PluginError as e:
    print("ERROR", e)
print("MODULES", [m for m in ("socket", "json", "re", "enum") if m in sys.modules])
import json
dumps, dumps_name, loads = api_caller._json
for v in [1, -2.5e300, "x\u2028\x00é", [None, True, {"a": {"b": [1.0, 1e-7]}}], {1: 2, 2.5: None, True: "t"}, (1, 2), 2**80, ""]:
    want = json.dumps(v, default=api_caller._encode, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    assert dumps(v) == want, (v, dumps(v), want)
    assert loads(want.encode()) == json.loads(want), v
for bad in [float("nan"), {(1,): 2}, object()]:
    try:
        dumps(bad)
        print("encoded", bad)
    except (TypeError, ValueError):
        pass
for s in [b"{", b"[1] x", b""]:
    try:
        loads(s)
        print("decoded", s)
    except ValueError:
        pass
print("SAME", dumps_name("é") == json.dumps("é"))
`, dir, sock).CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	for _, w := range []string{
		"RESULT {'found': ['é', 1.5, None]}\n", "ERROR no\n", "MODULES []\n", "SAME True\n",
	} {
		if !strings.Contains(string(out), w) {
			t.Errorf("python says\n%s\nwant %q", out, w)
		}
	}
	if strings.Contains(string(out), "encoded") || strings.Contains(string(out), "decoded") {
		t.Errorf("accepted what json refuses:\n%s", out)
	}
	if line := <-got; line != `{"id":1,"method":"find","args":{"query":{"q":["é\n",2,2.5,true,null,"AA=="]}}}`+"\n" {
		t.Errorf("request %q", line)
	}
}
