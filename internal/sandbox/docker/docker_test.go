package docker_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/app/apptest"
	"github.com/nekro-go/nekro/internal/host"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/internal/sandbox/docker"
	"github.com/nekro-go/nekro/internal/testutil"
	"github.com/nekro-go/nekro/plugin"
)

// runner returns the docker backend configured by .ci/docker.sh (which
// `make test` sources). Outside `make test` the tests skip; under CI
// (NEKRO_REQUIRE_DOCKER=1) a missing engine fails them.
func runner(t *testing.T) *docker.Runner {
	t.Helper()
	host := os.Getenv("NEKRO_TEST_DOCKER_HOST")
	if host == "" {
		if os.Getenv("NEKRO_REQUIRE_DOCKER") != "" {
			t.Fatal("NEKRO_TEST_DOCKER_HOST is not set: run the tests through `make test` (it sources .ci/docker.sh)")
		}
		t.Skip("no Docker engine for tests: run `make test`, which starts a private one")
	}
	r := docker.New(os.Getenv("NEKRO_TEST_DOCKER_IMAGE"))
	r.Host = host
	r.ExtraArgs = strings.Fields(os.Getenv("NEKRO_TEST_DOCKER_ARGS"))
	return r
}

func testPlugin() *plugin.Plugin {
	p := plugin.New(plugin.Meta{ModuleName: "docker_test", Author: "nekro"})
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "add", Doc: "Add."},
		func(_ *plugin.Ctx, a struct {
			A int `json:"a"`
			B int `json:"b"`
		}) (int, error) {
			return a.A + a.B, nil
		})
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Agent, Name: "ask", Doc: "Ends the run."},
		func(c *plugin.Ctx, _ struct{}) (string, error) { return "asked by " + c.UserID(), nil })
	return p
}

func TestDockerBackendRunsTheSameContract(t *testing.T) {
	r := runner(t)
	if err := r.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	a, err := apptest.Open(t, app.Config{DataDir: testutil.DataDir(t), Host: host.Config{Plugins: []*plugin.Plugin{testPlugin()}},
		Runtime: runtime.Config{Runner: r, Limits: sandbox.Limits{Timeout: 60 * time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	rt := a.Host
	exec1 := func(code string, l sandbox.Limits) *runtime.ExecResult {
		t.Helper()
		res, err := rt.Exec(context.Background(), runtime.ExecRequest{ChatKey: "dk", UserID: "u9", Code: code, Limits: l})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	res := exec1(`
import os, socket
print(add(2, 3))
try:
    add("x", 1)
except TypeError as e:
    print("TypeError:", e)
def attempt(label, f):
    try:
        f(); print(label, "ALLOWED")
    except Exception as e:
        print(label, "denied")
attempt("write-root", lambda: open("/x", "w"))
attempt("write-uploads", lambda: open("/app/uploads/x", "w"))
attempt("write-stubs", lambda: open("/app/.nekro/x", "w"))
attempt("network", lambda: socket.create_connection(("1.1.1.1", 53), timeout=1))
attempt("write-shared", lambda: open("/app/shared/ok", "w").write("1"))
attempt("write-packages", lambda: open("/app/shared/.packages/torch.py", "w"))
attempt("move-packages", lambda: os.rename("/app/shared/.packages", "/app/shared/moved"))
print("uid", os.getuid(), "cwd", os.getcwd(), "ck", _ck)
import ctypes
r = ctypes.CDLL(None, use_errno=True).unshare(0x10000000)
print("unshare", "denied" if r == -1 and ctypes.get_errno() == 1 else "ALLOWED")
ask()
print("AFTER")
`, sandbox.Limits{})
	for _, w := range []string{"5\n", "TypeError: add(): argument 'a' must be int, got str", "write-root denied",
		"write-uploads denied", "write-stubs denied", "network denied", "write-shared ALLOWED",
		"write-packages denied", "move-packages denied", "uid 1000000000 cwd /app ck dk", "unshare denied"} {
		if !strings.Contains(res.Output, w) {
			t.Errorf("output lacks %q:\n%s", w, res.Output)
		}
	}
	if res.StopType != sandbox.AgentStop || strings.Contains(res.Output, "AFTER") || string(res.AgentResult) != `"asked by u9"` {
		t.Errorf("agent stop: %v %s\n%s", res.StopType, res.AgentResult, res.Output)
	}

	start := time.Now()
	res = exec1("while True: pass", sandbox.Limits{Timeout: 2 * time.Second})
	if res.StopType != sandbox.Timeout || time.Since(start) > 15*time.Second {
		t.Errorf("timeout run: %v after %s", res.StopType, time.Since(start))
	}
	cmd := exec.Command("docker", "ps", "-q", "--filter", "label=nekro.sandbox=1")
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+r.Host)
	if out, err := cmd.Output(); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("containers left running: %q %v", out, err)
	}
}
