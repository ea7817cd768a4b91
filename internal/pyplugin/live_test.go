package pyplugin_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/testutil"
)

// liveSource is a plugin answering version() with "VERSION", and
// slow() with "slow VERSION" after writing the marker file and
// sleeping 4 s.
func liveSource(version, marker string) string {
	return `import asyncio

from nekro_agent.api.plugin import NekroPlugin, SandboxMethodType
from nekro_agent.api.schemas import AgentCtx

plugin = NekroPlugin(name="Live", module_name="live", description="reloaded in a test",
                     version="1", author="tester", url="https://example.org")


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "live_version")
async def live_version(_ctx: AgentCtx) -> str:
    """Which version answers."""
    return "` + version + `"


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "live_slow")
async def live_slow(_ctx: AgentCtx) -> str:
    """A call that lasts."""
    open(` + strconv.Quote(marker) + `, "w").close()
    await asyncio.sleep(4)
    return "slow ` + version + `"
`
}

// execServed runs code in chat c1 through nekro serve's API.
func execServed(t *testing.T, s *testutil.Served, code string) string {
	t.Helper()
	st, body := s.API("POST", "/api/chats/c1/exec", map[string]string{"code": code, "user_id": "u1"})
	if st != 200 {
		return "HTTP " + body
	}
	var res struct {
		Output string `json:"output"`
	}
	json.Unmarshal([]byte(body), &res)
	return res.Output
}

// waitFor runs code until its output contains want, within a generous
// deadline (a loaded machine is slow to start Python processes).
func waitFor(t *testing.T, s *testutil.Served, code, want, what string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var out string
	for time.Now().Before(deadline) {
		if out = execServed(t, s, code); strings.Contains(out, want) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: %q never came; last output %q\n%s", what, want, out, s.Logs.String())
}

// A Python plugin edited while nekro serves is loaded again without a
// restart: the next calls answer with the new code, a call in flight
// when it changed finishes on the old code, POST .../reload reloads at
// once, a plugin that appears is added, and one whose file goes is
// removed.
func TestPluginReloadWhileServing(t *testing.T) {
	data, plugins := testutil.DataDir(t), t.TempDir()
	marker := filepath.Join(t.TempDir(), "slow-started")
	file := filepath.Join(plugins, "live.py")
	write := func(path, body string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil { // as editors save: whole
			t.Fatal(err)
		}
	}
	write(file, liveSource("v1", marker))
	s := testutil.Serve(t, data, "tok", "NEKRO_PLUGIN_DIR="+plugins)
	if out := execServed(t, s, "print(live_version())"); !strings.Contains(out, "v1") {
		t.Fatalf("before the edit: %q\n%s", out, s.Logs.String())
	}

	// A slow call started on v1 finishes on v1 while v2 takes over.
	slow := make(chan string, 1)
	go func() { slow <- execServed(t, s, "print(live_slow())") }()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slow call never started\n%s", s.Logs.String())
		}
	}
	write(file, liveSource("v2", marker))
	waitFor(t, s, "print(live_version())", "v2", "after the edit")
	select {
	case out := <-slow:
		if !strings.Contains(out, "slow v1") {
			t.Errorf("the call in flight did not finish on the old code: %q", out)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("the call in flight never finished")
	}

	// The API reloads at once; a compiled-in plugin is not reloadable.
	if st, body := s.API("POST", "/api/plugins/tester.live/reload", nil); st != 200 {
		t.Errorf("reload: %d %s", st, body)
	}
	if st, body := s.API("POST", "/api/plugins/nekro.basic/reload", nil); st != 404 {
		t.Errorf("reload of a compiled-in plugin: want 404, got %d %s", st, body)
	}
	if out := execServed(t, s, "print(live_version())"); !strings.Contains(out, "v2") {
		t.Errorf("after the API's reload: %q", out)
	}

	// A plugin that appears is added; one that goes is removed.
	added := strings.ReplaceAll(strings.ReplaceAll(liveSource("v1", marker), `"live"`, `"added"`), "live_", "added_")
	write(filepath.Join(plugins, "added.py"), added)
	waitFor(t, s, "print(added_version())", "v1", "a new plugin")
	os.Remove(file)
	waitFor(t, s, "try:\n    live_version()\nexcept NameError:\n    print('GONE')\n", "GONE", "a removed plugin")
}
