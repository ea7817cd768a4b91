package mcp_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/testutil"
)

// npmDir is where scripts/deps.sh test installs the npm packages of
// testdata/npm/package.json: the reference MCP servers and the
// conformance suite.
func npmDir(t *testing.T) string {
	t.Helper()
	_, here, _, _ := goruntime.Caller(0)
	dir := filepath.Join(filepath.Dir(here), "..", "..", ".cache", "npm", "node_modules")
	if _, err := os.Stat(filepath.Join(dir, "@modelcontextprotocol", "server-everything")); err != nil {
		t.Fatalf("the MCP test servers are not installed (%v): run scripts/deps.sh test", err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed: run scripts/deps.sh test")
	}
	return dir
}

// mcpConfig writes a config file mounting the reference servers
// everything and memory, each child marked by marker in its environment.
func mcpConfig(t *testing.T, marker string) string {
	t.Helper()
	npm := npmDir(t)
	dir := t.TempDir()
	cfg := map[string]any{"mcpServers": map[string]any{
		"everything": map[string]any{"command": "node",
			"args": []string{filepath.Join(npm, "@modelcontextprotocol/server-everything/dist/index.js"), "stdio"},
			"env":  map[string]string{"NEKRO_MCP_TEST_MARKER": marker}},
		"memory": map[string]any{"command": "node",
			"args":        []string{filepath.Join(npm, "@modelcontextprotocol/server-memory/dist/index.js")},
			"env":         map[string]string{"NEKRO_MCP_TEST_MARKER": marker, "MEMORY_FILE_PATH": filepath.Join(dir, "memory.jsonl")},
			"autoApprove": []string{}, // a field of other clients: warned about, ignored
		},
	}}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// marked lists the processes whose environment holds marker.
func marked(marker string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmtSscan(e.Name(), &pid); err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && strings.Contains(string(env), "NEKRO_MCP_TEST_MARKER="+marker) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// The reference servers mounted through a config file are plugins
// mcp.everything and mcp.memory whose tools the sandbox's code calls by
// name; the children get the config's env and not nekro's secrets; none
// is left running once nekro exec ends; a disabled one is not callable.
func TestReferenceServersFromSandboxCode(t *testing.T) {
	data := testutil.DataDir(t)
	marker := filepath.Base(t.TempDir())
	cfg := mcpConfig(t, marker)

	r := testutil.RunNekro(t, nil, "--data", data, "--mcp-config", cfg, "plugins")
	for _, want := range []string{"mcp.everything", "everything_echo(message: str)", "everything_get_sum(a: float, b: float)",
		"mcp.memory", "memory_create_entities(entities: list[dict])", "memory_read_graph()"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("nekro plugins lacks %q:\n%s\n%s", want, r.Stdout, r.Stderr)
		}
	}
	if !strings.Contains(r.Stderr, "autoApprove") {
		t.Errorf("the unknown config field was not reported:\n%s", r.Stderr)
	}

	code := `
print(everything_echo("hello from the sandbox"))
print(everything_get_sum(2, 3.5))
env = everything_get_env()
print("secret leaked" if "s3cret-token" in str(env) else "no secret", "marker seen" if "` + marker + `" in str(env) else "no marker")
memory_create_entities([{"name": "nekro", "entityType": "runtime", "observations": ["runs plugins"]}])
g = memory_read_graph()
print("graph:", [e["name"] for e in g["entities"]])
try:
    memory_open_nodes(names="not a list")
except Exception as e:
    print("tool error:", type(e).__name__)
`
	cmd := exec.Command(testutil.Nekro(t), "--data", data, "--mcp-config", cfg, "exec", "--chat", "m1", "--timeout", "90s", "-")
	cmd.Env = append(os.Environ(), "NEKRO_API_TOKEN=s3cret-token", "NEKRO_LLM_API_KEY=s3cret-token")
	cmd.Stdin = strings.NewReader(code)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("nekro exec: %v\n%s", err, out)
	}
	for _, want := range []string{"Echo: hello from the sandbox", "5.5", "no secret marker seen", "graph: ['nekro']", "tool error: PluginError"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if pids := marked(marker); len(pids) > 0 {
		t.Errorf("MCP server processes outlived nekro exec: %v", pids)
	}

	if r := testutil.RunNekro(t, nil, "--data", data, "--mcp-config", cfg, "plugins", "disable", "mcp.memory"); r.Code != 0 {
		t.Fatalf("disable mcp.memory: %+v", r)
	}
	r = testutil.RunNekro(t, []byte("print(memory_read_graph())"), "--data", data, "--mcp-config", cfg, "exec", "--chat", "m1", "-")
	if r.Code != 1 || !strings.Contains(r.Stdout+r.Stderr, "NameError") || !strings.Contains(r.Stdout+r.Stderr, "memory_read_graph") {
		t.Errorf("a disabled MCP server's tool was callable: %+v", r)
	}
	if pids := marked(marker); len(pids) > 0 {
		t.Errorf("MCP server processes outlived nekro exec: %v", pids)
	}
}

// A server killed between two calls of a run is started again by the
// second call.
func TestKilledServerIsRestartedByTheNextCall(t *testing.T) {
	data := testutil.DataDir(t)
	marker := filepath.Base(t.TempDir())
	cfg := mcpConfig(t, marker)
	// The code and the test take turns through the chat's /app/shared.
	code := `
import os, time
print(everything_echo("one"))
open("/app/shared/first-done", "w").close()
while not os.path.exists("/app/shared/killed"):
    time.sleep(0.05)
print(everything_echo("two"))
`
	cmd := exec.Command(testutil.Nekro(t), "--data", data, "--mcp-config", cfg, "exec", "--chat", "k1", "--timeout", "120s", "-")
	cmd.Stdin = strings.NewReader(code)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	shared := files.Layout{Root: data}.SharedDir(files.ContainerKey("k1"))
	for {
		if _, err := os.Stat(filepath.Join(shared, "first-done")); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("nekro exec ended before the first call was done: %v\n%s", err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	pids := marked(marker)
	if len(pids) == 0 {
		t.Fatal("no server process to kill")
	}
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if err := os.WriteFile(filepath.Join(shared, "killed"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("nekro exec: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "Echo: one") || !strings.Contains(out.String(), "Echo: two") {
		t.Errorf("the second call did not restart the server:\n%s", out.String())
	}
	if pids := marked(marker); len(pids) > 0 {
		t.Errorf("MCP server processes outlived nekro exec: %v", pids)
	}
}

func fmtSscan(s string, pid *int) (int, error) { return fmt.Sscan(s, pid) }
