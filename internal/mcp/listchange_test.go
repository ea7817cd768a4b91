package mcp_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/testutil"
)

// toolServerConfig writes a config mounting testdata/toolserver as MCP
// server "changing" (plugin mcp.changing, methods changing_TOOL), whose
// tools are what toolsFile lists, its process marked by marker.
func toolServerConfig(t *testing.T, toolsFile, marker string) string {
	t.Helper()
	cfg := map[string]any{"mcpServers": map[string]any{
		"changing": map[string]any{"command": testutil.Binary(t, "./internal/mcp/testdata/toolserver"),
			"env": map[string]string{"NEKRO_TOOLSERVER_FILE": toolsFile, "NEKRO_MCP_TEST_MARKER": marker}},
	}}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// execOn runs code in chat through the playground's API and returns its
// output.
func execOn(t *testing.T, srv *testutil.Served, chat, code string) string {
	t.Helper()
	st, body := srv.API("POST", "/api/chats/"+chat+"/exec", map[string]any{"code": code})
	if st != http.StatusOK {
		t.Fatalf("exec in %s: %d %s\n%s", chat, st, body, srv.Logs)
	}
	var res struct {
		Output string `json:"output"`
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		t.Fatalf("exec answer: %v: %s", err, body)
	}
	return res.Output
}

// changingSignatures returns the signatures of mcp.changing's methods as
// GET /api/plugins lists them.
func changingSignatures(t *testing.T, srv *testutil.Served) []string {
	t.Helper()
	st, body := srv.API("GET", "/api/plugins", nil)
	if st != http.StatusOK {
		t.Fatalf("GET /api/plugins: %d %s", st, body)
	}
	var out struct {
		Plugins []struct {
			Key     string `json:"key"`
			Methods []struct {
				Signature string `json:"signature"`
			} `json:"methods"`
		} `json:"plugins"`
	}
	json.Unmarshal([]byte(body), &out)
	var sigs []string
	for _, p := range out.Plugins {
		if p.Key == "mcp.changing" {
			for _, m := range p.Methods {
				sigs = append(sigs, m.Signature)
			}
		}
	}
	return sigs
}

// waitForMethods waits until mcp.changing's methods are exactly want
// (signature prefixes, in name order), as GET /api/plugins lists them.
func waitForMethods(t *testing.T, srv *testutil.Served, want ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		sigs := changingSignatures(t, srv)
		ok := len(sigs) == len(want)
		for i := 0; ok && i < len(want); i++ {
			ok = strings.HasPrefix(sigs[i], want[i])
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("mcp.changing's methods are %q, want %q\n%s", sigs, want, srv.Logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A server's tools list changes while nekro serve runs: when the server
// announces it (notifications/tools/list_changed) the next runs call the
// new tools and a removed one is a NameError, without a restart of nekro;
// a run in progress keeps the set it started with; a server that comes
// back from a crash with other tools is listed again and its new tools
// mounted; the kept list (data/mcp) is what another nekro command reads.
func TestToolsListChangesReachTheNextRuns(t *testing.T) {
	data := testutil.DataDir(t)
	dir := t.TempDir()
	toolsFile := filepath.Join(dir, "tools")
	if err := os.WriteFile(toolsFile, []byte("alpha"), 0o644); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Base(t.TempDir())
	cfg := toolServerConfig(t, toolsFile, marker)
	srv := testutil.Serve(t, data, "op-token", "NEKRO_MCP_CONFIG="+cfg)

	if out := execOn(t, srv, "c1", `print(changing_alpha(text="hi"))`); !strings.Contains(out, "alpha says hi") {
		t.Fatalf("the first tool: %q\n%s", out, srv.Logs)
	}

	// alpha goes, beta (with an optional parameter) comes.
	if err := os.WriteFile(toolsFile, []byte("beta+"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitForMethods(t, srv, "changing_beta(text: str, times: int = 1)")
	if out := execOn(t, srv, "c1", `print(changing_beta(text="yo", times=2))`); !strings.Contains(out, "beta says yo yo") {
		t.Errorf("the new tool: %q\n%s", out, srv.Logs)
	}
	if out := execOn(t, srv, "c1", `changing_alpha(text="x")`); !strings.Contains(out, "NameError") || !strings.Contains(out, "changing_alpha") {
		t.Errorf("a removed tool: %q", out)
	}
	kept, err := os.ReadFile(filepath.Join(data, "mcp", "changing.tools.json"))
	if err != nil || !strings.Contains(string(kept), `"beta"`) || strings.Contains(string(kept), `"alpha"`) {
		t.Errorf("the kept tools list: %v %s", err, kept)
	}

	// A run in progress keeps its stubs: beta (changed under it, now
	// without times) still answers it, delta (new) is not in its set.
	code := `
import os, time
print(changing_beta(text="one"))
open("/app/shared/first-done", "w").close()
while not os.path.exists("/app/shared/changed"):
    time.sleep(0.05)
print(changing_beta(text="two"))
try:
    changing_delta(text="x")
except NameError:
    print("delta unknown to this run")
`
	done := make(chan string, 1)
	go func() {
		st, body := srv.API("POST", "/api/chats/c2/exec", map[string]any{"code": code})
		var res struct {
			Output string `json:"output"`
		}
		json.Unmarshal([]byte(body), &res)
		if st != http.StatusOK {
			res.Output = body
		}
		done <- res.Output
	}()
	shared := files.Layout{Root: data}.SharedDir(files.ContainerKey("c2"))
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(shared, "first-done")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not call beta:\n%s", srv.Logs)
		}
	}
	if err := os.WriteFile(toolsFile, []byte("beta,delta"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitForMethods(t, srv, "changing_beta(text: str)", "changing_delta(text: str)")
	if err := os.WriteFile(filepath.Join(shared, "changed"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := <-done
	for _, want := range []string{"beta says one", "beta says two", "delta unknown to this run"} {
		if !strings.Contains(out, want) {
			t.Errorf("the run in progress: %q lacks %q", out, want)
		}
	}
	if out := execOn(t, srv, "c2", `print(changing_delta(text="d"))`); !strings.Contains(out, "delta says d") {
		t.Errorf("the next run after the change: %q", out)
	}

	// The server dies; it comes back with other tools (no notification:
	// it starts with them), found by the list nekro makes after each start.
	pids := marked(marker)
	if len(pids) == 0 {
		t.Fatal("no server process to kill")
	}
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	for deadline := time.Now().Add(10 * time.Second); len(marked(marker)) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the killed server did not end")
		}
	}
	if err := os.WriteFile(toolsFile, []byte("gamma"), 0o644); err != nil {
		t.Fatal(err)
	}
	out = execOn(t, srv, "c1", `
try:
    changing_delta(text="x")
except Exception as e:
    print("delta failed:", type(e).__name__)
`)
	if !strings.Contains(out, "delta failed") {
		t.Errorf("a tool the restarted server no longer has: %q", out)
	}
	waitForMethods(t, srv, "changing_gamma(text: str)")
	if out := execOn(t, srv, "c1", `print(changing_gamma(text="g"))`); !strings.Contains(out, "gamma says g") {
		t.Errorf("a tool of the restarted server: %q", out)
	}

	// Another nekro command reads the kept list: the prompt offers gamma
	// (and starts no server to know it).
	r := testutil.RunNekro(t, nil, "--data", data, "--mcp-config", cfg, "chats", "prompt", "c1")
	if r.Code != 0 || !strings.Contains(r.Stdout, "changing_gamma(text: str)") || strings.Contains(r.Stdout, "changing_delta") {
		t.Errorf("nekro chats prompt: %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
}
