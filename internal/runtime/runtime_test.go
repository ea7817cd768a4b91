package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/app/apptest"
	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/host"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/internal/testutil"
	"github.com/nekro-go/nekro/plugin"
)

// The test plugin: one method of each type and methods that misbehave on
// command.
type sumArgs struct {
	Num1 int `json:"num1"`
	Num2 int `json:"num2"`
}

type echoArgs struct {
	Text  string         `json:"text"`
	Times int            `json:"times,omitempty" default:"1"`
	Tags  []string       `json:"tags,omitempty"`
	Meta  map[string]any `json:"meta,omitempty"`
	Blob  []byte         `json:"blob,omitempty"`
	Ratio *float64       `json:"ratio"`
}

var behaviorCalls atomic.Int64

func testPlugin() *plugin.Plugin {
	p := plugin.New(plugin.Meta{Name: "Test", ModuleName: "rt_test", Author: "nekro", Version: "0"})
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "add", Doc: "Add two ints."},
		func(_ *plugin.Ctx, a sumArgs) (int, error) { return a.Num1 + a.Num2, nil })
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "echo", Doc: "Echo back."},
		func(_ *plugin.Ctx, a echoArgs) (map[string]any, error) {
			r := 0.0
			if a.Ratio != nil {
				r = *a.Ratio
			}
			return map[string]any{"text": strings.Repeat(a.Text, a.Times), "tags": a.Tags, "meta": a.Meta, "blob": string(a.Blob), "ratio": r}, nil
		})
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "whoami", Doc: "Identity of the run."},
		func(c *plugin.Ctx, _ struct{}) (map[string]string, error) {
			return map[string]string{"chat": c.ChatKey(), "user": c.UserID(), "container": c.ContainerKey()}, nil
		})
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "run_id", Doc: "The run's id."},
		func(c *plugin.Ctx, _ struct{}) (string, error) { return c.RunID(), nil })
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "fail", Doc: "Always fails."},
		func(_ *plugin.Ctx, _ struct{}) (string, error) { return "", errors.New("the disk is full") })
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "explode", Doc: "Panics."},
		func(_ *plugin.Ctx, _ struct{}) (string, error) { panic("boom") })
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "hang", Doc: "Overruns.", Timeout: 300 * time.Millisecond},
		func(c *plugin.Ctx, _ struct{}) (string, error) {
			<-c.Done()
			time.Sleep(50 * time.Millisecond)
			return "late", nil
		})
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Agent, Name: "ask_agent", Doc: "Ends the run."},
		func(_ *plugin.Ctx, a struct {
			Q string `json:"q"`
		}) (string, error) {
			return "answer to " + a.Q, nil
		})
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Behavior, Name: "note", Doc: "Records."},
		func(_ *plugin.Ctx, a struct {
			T string `json:"t"`
		}) (string, error) {
			behaviorCalls.Add(1)
			return "noted " + a.T, nil
		})
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.MultimodalAgent, Name: "look", Doc: "Image."},
		func(_ *plugin.Ctx, _ struct{}) ([]plugin.ContentPart, error) {
			return []plugin.ContentPart{plugin.TextPart("a dot"), plugin.ImagePart("data:image/png;base64,AAAA")}, nil
		})
	return p
}

// testRuntime is the runtime of an App assembled for a test. Its runs go
// through the App's host, which gives them the enabled plugins' methods
// as it gives every caller's runs.
type testRuntime struct {
	*runtime.Runtime
	host *host.Host
}

func (r testRuntime) Exec(ctx context.Context, req runtime.ExecRequest) (*runtime.ExecResult, error) {
	return r.host.Exec(ctx, req)
}

// openRuntime assembles an App of cfg, closed when the test ends.
func openRuntime(t testing.TB, cfg app.Config) (testRuntime, error) {
	t.Helper()
	a, err := apptest.Open(t, cfg)
	if err != nil {
		return testRuntime{}, err
	}
	return testRuntime{Runtime: a.Runtime, host: a.Host}, nil
}

func open(t testing.TB) testRuntime {
	t.Helper()
	rt, err := openRuntime(t, app.Config{DataDir: testutil.DataDir(t), Host: host.Config{Plugins: []*plugin.Plugin{testPlugin()}},
		Runtime: runtime.Config{Limits: sandbox.Limits{Timeout: 20 * time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Runner().Check(context.Background()); err != nil {
		t.Fatalf("sandbox backend unusable (make test installs bubblewrap and python3): %v", err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	return rt
}

func run(t *testing.T, rt testRuntime, code string) *runtime.ExecResult {
	t.Helper()
	res, err := rt.Exec(context.Background(), runtime.ExecRequest{ChatKey: "chat-a", UserID: "user-1", Code: code})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestToolCallsAndArgumentErrors(t *testing.T) {
	rt := open(t)
	res := run(t, rt, `
print(add(2, 3))
print(add(num2=10, num1=5))
try:
    add("a", 3)
except TypeError as e:
    print("TypeError:", e)
try:
    add(1)
except TypeError as e:
    print("missing:", e)
r = echo("ab", times=2, tags=["x"], meta={"k": [1, 2.5, None]}, blob=b"\x00hi", ratio=0.5)
print(r["text"], r["tags"], r["meta"], repr(r["blob"]), r["ratio"])
print(echo("z", ratio=None)["text"])
try:
    echo("z", ratio=None, times=1.5)
except TypeError as e:
    print("float for int:", e)
try:
    echo({1, 2}, ratio=None)
except TypeError as e:
    print("set:", e)
try:
    echo(object(), ratio=None)
except TypeError as e:
    print("object:", e)
`)
	want := []string{
		"5\n", "15\n",
		`TypeError: add(): argument 'num1' must be int, got str ("a")`,
		"missing: add() missing 1 required positional argument: 'num2'",
		"abab ['x'] {'k': [1, 2.5, None]} '\\x00hi' 0.5",
		"\nz\n",
		"float for int: echo(): argument 'times' must be int, got float (1.5)",
		"set: echo(): argument 'text' must be str, got list",
		"object: echo(): argument 'text': value of type object cannot be sent",
	}
	for _, w := range want {
		if !strings.Contains(res.Output, w) {
			t.Errorf("output lacks %q:\n%s", w, res.Output)
		}
	}
	if res.StopType != sandbox.Normal {
		t.Errorf("stop type %v, want NORMAL; output:\n%s", res.StopType, res.Output)
	}
}

func TestIdentityComesFromTheRun(t *testing.T) {
	rt := open(t)
	res := run(t, rt, `
w = whoami()
print(w["chat"], w["user"], w["container"], _ck)
`)
	if got := strings.TrimSpace(res.Output); got != "chat-a user-1 sandbox_chat-a chat-a" {
		t.Errorf("identity = %q", got)
	}
}

func TestAgentEndsTheRun(t *testing.T) {
	rt := open(t)
	res := run(t, rt, `
print("before")
ask_agent("life")
print("AFTER THE AGENT CALL")
`)
	if res.StopType != sandbox.AgentStop || res.ExitCode != 8 {
		t.Errorf("stop %v exit %d, want AGENT 8", res.StopType, res.ExitCode)
	}
	if strings.Contains(res.Output, "AFTER THE AGENT CALL") {
		t.Errorf("code after the AGENT call ran:\n%s", res.Output)
	}
	var s string
	if err := json.Unmarshal(res.AgentResult, &s); err != nil || s != "answer to life" || res.AgentMethod != "ask_agent" {
		t.Errorf("agent result %s (%v) from %q", res.AgentResult, err, res.AgentMethod)
	}
}

func TestMultimodalAgentEndsTheRun(t *testing.T) {
	rt := open(t)
	res := run(t, rt, "look()\nprint('AFTER')")
	if res.StopType != sandbox.MultimodalAgent || strings.Contains(res.Output, "AFTER") {
		t.Fatalf("stop %v, output:\n%s", res.StopType, res.Output)
	}
	var parts []plugin.ContentPart
	if err := json.Unmarshal(res.AgentResult, &parts); err != nil || len(parts) != 2 || parts[1].ImageURL == nil {
		t.Errorf("parts %s: %v", res.AgentResult, err)
	}
}

func TestBehaviorReturnsAndIsReported(t *testing.T) {
	rt := open(t)
	var seen []string
	res, err := rt.Exec(context.Background(), runtime.ExecRequest{ChatKey: "c", Code: "print(note('x'))\nprint('go on')",
		OnResult: func(m *pluginhost.MethodInfo, r json.RawMessage) { seen = append(seen, m.Name+"="+string(r)) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.StopType != sandbox.Normal || !strings.Contains(res.Output, "noted x\ngo on") {
		t.Errorf("stop %v output %q", res.StopType, res.Output)
	}
	if len(seen) != 1 || seen[0] != `note="noted x"` {
		t.Errorf("OnResult saw %v", seen)
	}
}

func TestStopTypeIgnoresPrintedText(t *testing.T) {
	rt := open(t)
	res := run(t, rt, `print("[SANDBOX_RUN_ENDS_WITH_AGENT]")
print("The agent method `+"`x`"+` returned:")`)
	if res.StopType != sandbox.Normal {
		t.Errorf("printed marker changed stop type to %v", res.StopType)
	}
	res = run(t, rt, "import sys\nsys.exit(8)")
	if res.StopType != sandbox.Error || res.Note == "" {
		t.Errorf("exit(8) without an agent call: stop %v note %q, want ERROR with a note", res.StopType, res.Note)
	}
	res = run(t, rt, "exit(9)")
	if res.StopType != sandbox.Manual {
		t.Errorf("exit(9): stop %v, want MANUAL", res.StopType)
	}
}

func TestPluginErrorsReachPython(t *testing.T) {
	rt := open(t)
	res := run(t, rt, `
try:
    fail()
except PluginError as e:
    print("caught:", e)
try:
    explode()
except NekroError as e:
    print("panic:", e)
try:
    hang()
except NekroError as e:
    print("hang:", e)
print(add(1, 1))
fail()
`)
	for _, w := range []string{
		"caught: the disk is full",
		"panic: explode(): the plugin method failed with an internal error (panic: boom)",
		"hang: hang(): the method did not answer within 300ms",
		"\n2\n",
		"Traceback (most recent call last):",
		`File "main.py", line 15`,
		"PluginError: the disk is full",
	} {
		if !strings.Contains(res.Output, w) {
			t.Errorf("output lacks %q:\n%s", w, res.Output)
		}
	}
	if strings.Contains(res.Output, "api_caller") || strings.Contains(res.Output, "boot.py") {
		t.Errorf("traceback is not short (shows runtime frames):\n%s", res.Output)
	}
	if res.StopType != sandbox.Error {
		t.Errorf("uncaught plugin error: stop %v, want ERROR", res.StopType)
	}
	if len(res.Calls) != 5 || res.Calls[0].Error != "the disk is full" {
		t.Errorf("calls = %+v", res.Calls)
	}
}

func TestThreadsAndForkedChildrenCanCall(t *testing.T) {
	rt := open(t)
	res := run(t, rt, `
import threading, os
out = []
def work(i):
    for j in range(50):
        assert add(i, j) == i + j
    out.append(i)
ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]
print("threads", len(out))
pid = os.fork()
if pid == 0:
    print("child", add(20, 22), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
print("parent", add(1, 2))
`)
	for _, w := range []string{"threads 8", "child 42", "parent 3"} {
		if !strings.Contains(res.Output, w) {
			t.Errorf("output lacks %q:\n%s", w, res.Output)
		}
	}
}

func TestTimeoutKillsTheWholeTree(t *testing.T) {
	rt := open(t)
	marker := fmt.Sprintf("nekro-timeout-%d", time.Now().UnixNano())
	start := time.Now()
	res, err := rt.Exec(context.Background(), runtime.ExecRequest{ChatKey: "c", Limits: sandbox.Limits{Timeout: 2 * time.Second},
		Code: fmt.Sprintf(`
import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", %q])
print("started", flush=True)
while True: pass
`, marker)})
	if err != nil {
		t.Fatal(err)
	}
	// The 2 s timeout counts from the code's release; a cold sandbox's
	// start before it depends on the machine's load, so only a hang is
	// judged by the wall clock.
	if res.Duration > 3*time.Second {
		t.Errorf("timeout run lasted %s after its code started, want under 3s", res.Duration)
	}
	if took := time.Since(start); took > 60*time.Second {
		t.Errorf("timeout run took %s of wall time", took)
	}
	if res.StopType != sandbox.Timeout || !strings.Contains(res.Output, "started") {
		t.Errorf("stop %v, want TIMEOUT after the child started; output:\n%s", res.StopType, res.Output)
	}
	out, _ := exec.Command("pgrep", "-f", marker).Output()
	if len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("processes left behind: %s", out)
	}
}

func TestOutputIsCappedHeadAndTail(t *testing.T) {
	rt := open(t)
	res, err := rt.Exec(context.Background(), runtime.ExecRequest{ChatKey: "c", Limits: sandbox.Limits{OutputBytes: 1000},
		Code: `print("FIRST"); print("x" * 100000); print("LAST")`})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Output) > 1200 || !strings.Contains(res.Output, "FIRST") || !strings.Contains(res.Output, "LAST") ||
		!strings.Contains(res.Output, "bytes of output cut") {
		t.Errorf("capped output (%d bytes): %q", len(res.Output), res.Output)
	}
}

func TestSandboxIsolation(t *testing.T) {
	rt := open(t)
	// A port the host listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	// Another chat's upload and the database file exist on the host.
	other, err := rt.ImportUpload(context.Background(), "chat-b", writeFile(t, "secret-b.txt", "chat B secret"))
	if err != nil {
		t.Fatal(err)
	}
	_ = other
	db := filepath.Join(rt.Layout().Root, "nekro.db")
	os.WriteFile(db, []byte("db"), 0o600)
	if _, err := rt.ImportUpload(context.Background(), "chat-a", writeFile(t, "mine.txt", "mine")); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	res := run(t, rt, fmt.Sprintf(`
import socket, os
def attempt(label, f):
    try:
        f()
        print(label, "ALLOWED")
    except Exception as e:
        print(label, "denied", type(e).__name__)
def tcp():
    s = socket.create_connection(("127.0.0.1", %d), timeout=2)
def write(p):
    return lambda: open(p, "w").write("x")
attempt("tcp-host", tcp)
attempt("read-db", lambda: open(%q).read())
attempt("read-other-chat", lambda: open(%q).read())
attempt("list-data", lambda: os.listdir(%q))
attempt("list-root", lambda: os.listdir("/root"))
attempt("list-home", lambda: os.listdir("/home"))
attempt("list-checkout", lambda: os.listdir(%q))
attempt("write-app", write("/app/x"))
attempt("write-uploads", write("/app/uploads/mine.txt"))
attempt("write-usr", write("/usr/x"))
attempt("write-etc", write("/etc/x"))
attempt("write-root", write("/x"))
attempt("write-rpc-dir", write("/app/.nekro/x"))
attempt("write-sysctl", write("/proc/sys/kernel/panic"))
attempt("write-shared", write("/app/shared/ok.txt"))
attempt("write-tmp", write("/tmp/ok.txt"))
print("own upload:", open("/app/uploads/mine.txt").read())
print("uploads:", os.listdir("/app/uploads"))
print("pid", os.getpid(), "uid", os.getuid())
`, port, db, filepath.Join(rt.Layout().UploadsDir("chat-b"), "secret-b.txt"), rt.Layout().Root, wd))
	for _, label := range []string{"tcp-host", "read-db", "read-other-chat", "list-data", "list-root", "list-home",
		"list-checkout", "write-app", "write-uploads", "write-usr", "write-etc", "write-root", "write-rpc-dir", "write-sysctl"} {
		if !strings.Contains(res.Output, label+" denied") {
			t.Errorf("%s was not denied:\n%s", label, res.Output)
		}
	}
	for _, w := range []string{"write-shared ALLOWED", "write-tmp ALLOWED", "own upload: mine", "uploads: ['mine.txt']"} {
		if !strings.Contains(res.Output, w) {
			t.Errorf("output lacks %q:\n%s", w, res.Output)
		}
	}
	if os.Geteuid() == 0 && strings.Contains(res.Output, "uid 0") {
		t.Errorf("sandbox runs as uid 0:\n%s", res.Output)
	}
	// The file the code wrote is in the sandbox's shared dir on the host.
	b, err := os.ReadFile(filepath.Join(rt.Layout().SharedDir("sandbox_chat-a"), "ok.txt"))
	if err != nil || string(b) != "x" {
		t.Errorf("shared file on host: %q, %v", b, err)
	}
}

func writeFile(t *testing.T, name, content string) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSyntaxErrorIsAnError(t *testing.T) {
	rt := open(t)
	res := run(t, rt, "print('a'\n")
	if res.StopType != sandbox.Error || !strings.Contains(res.Output, "SyntaxError") {
		t.Errorf("stop %v output %q", res.StopType, res.Output)
	}
}

func TestCancelledRunIsManual(t *testing.T) {
	rt := open(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Cancel once the run is under way (it has written its marker): a
	// cold sandbox on a busy machine may take seconds to get there.
	marker := filepath.Join(rt.Layout().SharedDir(files.ContainerKey("c")), "started")
	go func() {
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := os.Stat(marker); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	res, err := rt.Exec(ctx, runtime.ExecRequest{ChatKey: "c",
		Code: "import time\nopen('/app/shared/started', 'w').close()\ntime.sleep(120)"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the run never started within 60 s: %v", err)
	}
	if res.StopType != sandbox.Manual {
		t.Errorf("stop %v, want MANUAL", res.StopType)
	}
}

func TestBadKeysAreRefused(t *testing.T) {
	rt := open(t)
	for _, k := range []string{"", strings.Repeat("a", 300), "a\x00b"} {
		if _, err := rt.Exec(context.Background(), runtime.ExecRequest{ChatKey: k, Code: "pass"}); err == nil {
			t.Errorf("chat key %q accepted", k)
		}
	}
	// Hostile but valid keys stay inside the data directory.
	res, err := rt.Exec(context.Background(), runtime.ExecRequest{ChatKey: "../../etc", Code: "open('/app/shared/f','w').write('1')"})
	if err != nil || res.StopType != sandbox.Normal {
		t.Fatalf("run: %v %+v", err, res)
	}
	matches, _ := filepath.Glob(filepath.Join(rt.Layout().Root, "sandboxes", "*", "f"))
	if len(matches) != 1 {
		t.Errorf("file of chat ../../etc not under sandboxes/: %v", matches)
	}
}

// Memory and processes are limited per run, not only per process: a run
// that forks cannot add its children's memory up, nor fill /dev/shm.
func TestRunLimitsBindTheWholeRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("per-run cgroups need a root host; rlimits alone apply")
	}
	// Only this process's groups: other test packages run sandboxes at
	// the same time.
	groups := func() map[string]bool {
		m := map[string]bool{}
		found, _ := filepath.Glob(fmt.Sprintf("/sys/fs/cgroup/*/nekro/run-%d-*", os.Getpid()))
		for _, g := range found {
			m[g] = true
		}
		return m
	}
	before := groups()
	rt, err := openRuntime(t, app.Config{DataDir: testutil.DataDir(t), Host: host.Config{Plugins: []*plugin.Plugin{testPlugin()}},
		Runtime: runtime.Config{Limits: sandbox.Limits{Timeout: 30 * time.Second, MemoryBytes: 256 << 20, Processes: 32, TmpBytes: 16 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, rt, `
import os, select
ready_r, ready_w = os.pipe()
hold_r, hold_w = os.pipe()
kids = []
for i in range(4):
    pid = os.fork()
    if pid == 0:
        os.close(ready_r); os.close(hold_w)
        b = bytearray(120 << 20)          # under the per-process limit...
        for j in range(0, len(b), 4096):  # ...but 4 x 120 MiB is over the run's 256
            b[j] = 1
        os.write(ready_w, b"x")
        os.read(hold_r, 1)                # held until every child has its memory or died
        os._exit(0)
    kids.append(pid)
os.close(ready_w); os.close(hold_r)
# On a busy machine a child could finish before the next starts, and
# their memory would never add up: each holds its memory until all four
# have allocated theirs or been killed.
codes, ready = {}, 0
while ready + len(codes) < len(kids):
    if select.select([ready_r], [], [], 0.05)[0]:
        ready += len(os.read(ready_r, 8))
    for k in kids:
        if k not in codes:
            p, st = os.waitpid(k, os.WNOHANG)
            if p:
                codes[k] = os.waitstatus_to_exitcode(st)
os.close(hold_w)
for k in kids:
    if k not in codes:
        codes[k] = os.waitstatus_to_exitcode(os.waitpid(k, 0)[1])
print("children:", [codes[k] for k in kids])
forked = 0
try:
    for i in range(100):
        if os.fork() == 0:
            import time; time.sleep(5); os._exit(0)
        forked += 1
except OSError as e:
    print("fork stopped after", forked, e.errno)
try:
    open("/dev/shm/big", "wb").write(b"x" * (64 << 20))
except OSError as e:
    print("shm:", e.errno)
try:
    open("/dev/evil", "w")
except OSError as e:
    print("dev:", e.errno)
`)
	if !strings.Contains(res.Output, "-9") {
		t.Errorf("no child was killed for memory (children exit codes should include -9):\n%s", res.Output)
	}
	if !strings.Contains(res.Output, "fork stopped after") {
		t.Errorf("100 forks were allowed with a 32-process limit:\n%s", res.Output)
	}
	for _, w := range []string{"shm: 28", "dev: 30"} {
		if !strings.Contains(res.Output, w) {
			t.Errorf("output lacks %q:\n%s", w, res.Output)
		}
	}
	rt.Close(context.Background()) // waits for the run's group to go
	for g := range groups() {
		if !before[g] {
			t.Errorf("cgroup left behind: %s", g)
		}
	}
}

// A sandbox that fills /app/shared past its quota gets it emptied, and
// the run says so.
func TestSharedQuotaEmptiesAnOverfullSandbox(t *testing.T) {
	rt, err := openRuntime(t, app.Config{DataDir: testutil.DataDir(t), Host: host.Config{Plugins: []*plugin.Plugin{testPlugin()}},
		Runtime: runtime.Config{SharedQuota: 4 << 20,
			NoVolumes: true, // the fallback where volumes cannot be made
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	res := run(t, rt, `open("/app/shared/keep.txt", "w").write("small")`)
	if res.Note != "" {
		t.Errorf("small write noted: %q", res.Note)
	}
	res = run(t, rt, `
for i in range(3):
    open(f"/app/shared/big{i}", "wb").write(b"x" * (2 << 20))
`)
	if !strings.Contains(res.Note, "over the 4 MiB quota, and was emptied") {
		t.Errorf("note %q", res.Note)
	}
	// The package layer stays, a mount point; its contents went too.
	res = run(t, rt, `import os; print(sorted(os.listdir("/app/shared")), os.listdir("/app/shared/.packages"))`)
	if strings.TrimSpace(res.Output) != "['.packages'] []" {
		t.Errorf("shared after the quota: %s", res.Output)
	}
}

// Other users of the host can read neither the database nor a chat's
// uploads, and have no socket to connect to: a run's RPC connection is a
// descriptor handed to its sandbox, with no path on the host (a path
// would show in the process table and could be dialled).
func TestOtherHostUsersCannotReachRunsOrData(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI runs the tests as root")
		}
		t.Skip("needs root to act as another host user")
	}
	rt := open(t)
	if _, err := rt.ImportUpload(context.Background(), "chat-a", writeFile(t, "private.txt", "secret")); err != nil {
		t.Fatal(err)
	}
	done := make(chan *runtime.ExecResult)
	go func() {
		res, _ := rt.Exec(context.Background(), runtime.ExecRequest{ChatKey: "chat-a", UserID: "u",
			Code: "import time; print(add(1, 2)); time.sleep(3)"})
		done <- res
	}()
	time.Sleep(1500 * time.Millisecond) // the run is live and has called the host
	var sockets []string
	filepath.WalkDir(rt.Layout().Root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type()&os.ModeSocket != 0 {
			sockets = append(sockets, p)
		}
		return nil
	})
	if len(sockets) > 0 {
		t.Errorf("a live run has sockets under the data directory: %v", sockets)
	}
	if b, _ := os.ReadFile("/proc/net/unix"); strings.Contains(string(b), rt.Layout().Root) {
		t.Errorf("a socket bound under the data directory is listed in /proc/net/unix")
	}
	db := rt.Layout().Database()
	upload := filepath.Join(rt.Layout().UploadsDir("chat-a"), "private.txt")
	shared := rt.Layout().SharedDir("sandbox_chat-a")
	out, _ := exec.Command("setpriv", "--reuid=4242", "--regid=4242", "--clear-groups", "/usr/bin/python3", "-I", "-c", fmt.Sprintf(`
import os
def attempt(label, f):
    try:
        f(); print(label, "ALLOWED")
    except OSError as e:
        print(label, "denied", e.errno)
attempt("db", lambda: open(%q, "rb").read())
attempt("upload", lambda: open(%q).read())
attempt("shared", lambda: os.listdir(%q))
`, db, upload, shared)).CombinedOutput()
	for _, w := range []string{"db denied", "upload denied", "shared denied"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("another host user: want %q:\n%s", w, out)
		}
	}
	if res := <-done; res == nil || res.StopType != sandbox.Normal || strings.TrimSpace(res.Output) != "3" {
		t.Errorf("the run itself failed: %+v", res)
	}
}

// No process of a run keeps running after an AGENT call, not even one the
// calling process forked from.
func TestAgentCallEndsEveryProcessOfTheRun(t *testing.T) {
	rt := open(t)
	res := run(t, rt, `
import os, time, sys
pid = os.fork()
if pid == 0:
    ask_agent("from the child")
else:
    os.waitpid(pid, 0)
    time.sleep(1)
    print("PARENT CONTINUED AFTER AGENT", flush=True)
`)
	if res.StopType != sandbox.AgentStop || strings.Contains(res.Output, "PARENT CONTINUED") {
		t.Errorf("stop %v, output:\n%s", res.StopType, res.Output)
	}
}

// At most Config.MaxConcurrentRuns sandboxes run at once; the others wait
// their turn instead of failing.
func TestConcurrentRunsAreBounded(t *testing.T) {
	rt, err := openRuntime(t, app.Config{DataDir: testutil.DataDir(t), Host: host.Config{Plugins: []*plugin.Plugin{testPlugin()}},
		Runtime: runtime.Config{MaxConcurrentRuns: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	type span struct{ start, end float64 }
	spans := make(chan span, 5)
	for i := 0; i < 5; i++ {
		go func(i int) {
			res, err := rt.Exec(context.Background(), runtime.ExecRequest{ChatKey: fmt.Sprintf("c%d", i),
				Code: "import time\ns = time.time()\ntime.sleep(0.6)\nprint(s, time.time())"})
			var sp span
			if err == nil {
				fmt.Sscan(res.Output, &sp.start, &sp.end)
			}
			spans <- sp
		}(i)
	}
	var all []span
	for i := 0; i < 5; i++ {
		sp := <-spans
		if sp.end == 0 {
			t.Fatal("a run failed")
		}
		all = append(all, sp)
	}
	for _, a := range all {
		overlapping := 0
		for _, b := range all {
			if b.start <= a.start && a.start < b.end {
				overlapping++
			}
		}
		if overlapping > 2 {
			t.Errorf("%d runs at once, limit 2: %v", overlapping, all)
		}
	}
}
