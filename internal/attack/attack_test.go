// Package attack_test attacks nekro through its real binary, the way a
// hostile chat user (steering the model's code), a hostile process of
// another host user or a careless parent process would. Each test is one
// finding of the security review (issue 8) kept closed.
package attack_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/testutil"
)

// result is what one nekro command did.
type result struct {
	stdout, stderr string
	code           int
}

// nekro runs the binary with args, the extra environment and descriptors
// (extra[i] becomes descriptor 3+i, as a parent process would leave it).
func nekro(t *testing.T, env []string, extra []*os.File, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(testutil.NekroExamples(t), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.ExtraFiles = extra
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Stdin = strings.NewReader(stdin)
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("nekro %v: %v", args, err)
	}
	return result{out.String(), errb.String(), cmd.ProcessState.ExitCode()}
}

// execCode runs code with `nekro exec` in chat as user u.
func execCode(t *testing.T, data, chat, code string, env []string, extra []*os.File, flags ...string) result {
	t.Helper()
	args := append([]string{"exec", "--data", data, "--chat", chat, "--user", "u1"}, flags...)
	return nekro(t, env, extra, code, append(args, "-")...)
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI runs the tests as root")
		}
		t.Skip("needs root (per-chat uids and volumes)")
	}
}

// The host's environment holds the model's API key, the API token and the
// database URL. No process of a sandbox may see them: not the code's,
// not PID 1, not bwrap's.
func TestSandboxHoldsNoHostSecret(t *testing.T) {
	data := testutil.DataDir(t)
	env := []string{
		"NEKRO_LLM_API_KEY=sk-attack-llm-key",
		"NEKRO_API_TOKEN=tok-attack-api-token",
		"NEKRO_DATABASE_URL=sqlite:" + filepath.Join(data, "nekro.db"),
	}
	r := execCode(t, data, "thief", `
import os
found = []
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    for f in ("environ", "cmdline", "status"):
        try:
            b = open(f"/proc/{pid}/{f}", "rb").read()
        except OSError:
            continue
        for s in (b"sk-attack", b"tok-attack", b"sqlite:"):
            if s in b:
                found.append((pid, f, s.decode()))
print("FOUND", found)
print("PID", os.getpid(), "PIDS", sorted(p for p in os.listdir("/proc") if p.isdigit()))
`, env, nil)
	if r.code != 0 {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "FOUND []") {
		t.Errorf("the sandbox reads host secrets:\n%s", r.stdout)
	}
	// The code is PID 1 of its namespace: no sandbox manager process with
	// the host's environment or command line shares it.
	if !strings.Contains(r.stdout, "PID 1 PIDS ['1']") {
		t.Errorf("processes other than the code's own are visible:\n%s", r.stdout)
	}
}

// A descriptor nekro inherits from its parent (a secret file, the
// database opened read-write) must not reach the code.
func TestInheritedDescriptorsStayOutOfTheSandbox(t *testing.T) {
	data := testutil.DataDir(t)
	secretPath := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secretPath, []byte("TOPSECRET-INHERITED"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(data, 0o711); err != nil {
		t.Fatal(err)
	}
	secret, err := os.Open(secretPath)
	if err != nil {
		t.Fatal(err)
	}
	defer secret.Close()
	dbFile, err := os.OpenFile(filepath.Join(data, "nekro.db"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer dbFile.Close()
	null, _ := os.Open(os.DevNull)
	defer null.Close()
	// Descriptors 3-6 are /dev/null, 7 the secret, 8 the database.
	extra := []*os.File{null, null, null, null, secret, dbFile}
	r := execCode(t, data, "fds", `
import os
seen = []
for fd in range(3, 1024):
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        continue
    content = b""
    try:
        os.lseek(fd, 0, 0)
        content = os.read(fd, 100)
    except OSError:
        pass
    seen.append((fd, target, content))
print("SEEN", seen)
`, nil, extra)
	if r.code != 0 {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	for _, leak := range []string{"TOPSECRET", "secret.txt", "nekro.db", "SQLite"} {
		if strings.Contains(r.stdout, leak) {
			t.Errorf("an inherited descriptor reached the code (%s):\n%s", leak, r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "SEEN [") {
		t.Errorf("output: %s", r.stdout)
	}
}

var uidRE = regexp.MustCompile(`UID (\d+)`)

func sandboxUID(t *testing.T, r result) int {
	t.Helper()
	m := uidRE.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no uid printed (exit %d):\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	uid, _ := strconv.Atoi(m[1])
	return uid
}

// Every chat's sandbox runs as a host uid of its own, kept across runs;
// its directories belong to it alone, so another chat's uid (or nobody)
// can read none of them, and there is no socket to dial.
func TestEachChatRunsAsItsOwnUID(t *testing.T) {
	requireRoot(t)
	data := testutil.DataDir(t)
	const writeSecret = `
import os
open("/app/shared/secret-a.txt", "w").write("chat A's secret")
print("UID", os.getuid())
`
	a := sandboxUID(t, execCode(t, data, "chat-a", writeSecret, nil, nil))
	b := sandboxUID(t, execCode(t, data, "chat-b", `import os; print("UID", os.getuid())`, nil, nil))
	again := sandboxUID(t, execCode(t, data, "chat-a", `import os; print("UID", os.getuid())`, nil, nil))
	if a == b || a != again || a < 100000 || a == 65534 || b == 65534 {
		t.Fatalf("uids: chat-a %d then %d, chat-b %d", a, again, b)
	}
	// While a run of chat A is live, chat B's uid and nobody attack it
	// from the host.
	done := make(chan result, 1)
	layout := files.Layout{Root: data}
	sharedA, uploadsA := layout.SharedDir(files.ContainerKey("chat-a")), layout.UploadsDir("chat-a")
	// The live run says it is under way (a marker in its /app/shared) and
	// lasts until the test releases it: no guess at how long a sandbox
	// takes to start on a busy machine.
	go func() {
		done <- execCode(t, data, "chat-a", `import os, time
open("/app/shared/live", "w").close()
for _ in range(500):
    if os.path.exists("/app/shared/release"):
        break
    time.sleep(0.05)
print('UID', 0)`, nil, nil)
	}()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(sharedA, "live")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the live run of chat-a did not start within 60 s")
		}
	}
	// While it runs, its directories (volumes or plain) are the chat's own.
	for _, dir := range []string{sharedA, uploadsA} {
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != a || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: owner %d mode %v, want %d 0700", dir, st.Uid, fi.Mode().Perm(), a)
		}
	}
	attack := fmt.Sprintf(`
import os, socket
def attempt(label, f):
    try:
        f(); print(label, "ALLOWED")
    except OSError as e:
        print(label, "denied", e.errno)
attempt("read-shared", lambda: open(%q).read())
attempt("list-shared", lambda: os.listdir(%q))
attempt("list-uploads", lambda: os.listdir(%q))
socks = []
for root, dirs, files in os.walk(%q):
    for f in files:
        p = os.path.join(root, f)
        try:
            if os.path.stat.S_ISSOCK(os.lstat(p).st_mode):
                socks.append(p)
        except OSError:
            pass
print("SOCKETS", socks)
`, filepath.Join(sharedA, "secret-a.txt"), sharedA, uploadsA, data)
	for _, who := range []string{strconv.Itoa(b), "65534"} {
		out, _ := exec.Command("setpriv", "--reuid="+who, "--regid="+who, "--clear-groups",
			"/usr/bin/python3", "-I", "-c", attack).CombinedOutput()
		for _, w := range []string{"read-shared denied", "list-shared denied", "list-uploads denied", "SOCKETS []"} {
			if !strings.Contains(string(out), w) {
				t.Errorf("as uid %s: want %q:\n%s", who, w, out)
			}
		}
	}
	// ps shows nothing to dial either: no socket path on any command line.
	ps, _ := exec.Command("ps", "-eo", "args").Output()
	if strings.Contains(string(ps), "rpc.sock") {
		t.Errorf("a socket path shows in ps:\n%s", ps)
	}
	if err := os.WriteFile(filepath.Join(sharedA, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.code != 0 {
		t.Errorf("the live run failed: %d %s %s", r.code, r.stdout, r.stderr)
	}

	// The operator's range is used and a range among system uids refused.
	other := testutil.DataDir(t)
	if got := sandboxUID(t, execCode(t, other, "c", `import os; print("UID", os.getuid())`, nil, nil,
		"--sandbox-uids", "1500000000-1500000009")); got != 1500000000 {
		t.Errorf("uid %d, want the range's first, 1500000000", got)
	}
	r := execCode(t, other, "c", "pass", nil, nil, "--sandbox-uids", "1000-2000")
	if r.code == 0 || !strings.Contains(r.stderr, "--sandbox-uids") || !strings.Contains(r.stderr, "below 100000") {
		t.Errorf("a range of system uids: exit %d, %s", r.code, r.stderr)
	}
}

// syscall numbers of the attacks below, per architecture.
var attackSyscalls = map[string]map[string]int{
	"amd64": {"unshare": 272, "ptrace": 101, "bpf": 321, "io_uring_setup": 425, "keyctl": 250, "mount": 165, "perf_event_open": 298, "setns": 308},
	"arm64": {"unshare": 97, "ptrace": 117, "bpf": 280, "io_uring_setup": 425, "keyctl": 219, "mount": 40, "perf_event_open": 241, "setns": 268},
}

// The kernel calls a sandbox has no business making are refused, while
// the standard library keeps working.
func TestKernelSurfaceIsClosed(t *testing.T) {
	nr := attackSyscalls[runtime.GOARCH]
	if nr == nil {
		t.Skipf("no syscall table for %s", runtime.GOARCH)
	}
	data := testutil.DataDir(t)
	r := execCode(t, data, "kernel", fmt.Sprintf(`
import ctypes, os, socket, subprocess, threading, multiprocessing, time
libc = ctypes.CDLL(None, use_errno=True)
NR = %s
def sys(label, *args):
    r = libc.syscall(NR[label], *[ctypes.c_long(a) for a in args])
    e = ctypes.get_errno()
    print(label, "denied" if r == -1 and e == 1 else "ALLOWED r=%%d errno=%%d" %% (r, e))
CLONE_NEWUSER = 0x10000000
sys("unshare", CLONE_NEWUSER)
sys("setns", 0, 0)
sys("mount", 0, 0, 0, 0, 0)
sys("bpf", 0, 0, 0)
sys("keyctl", 0, 0)
sys("io_uring_setup", 1, 0)
sys("perf_event_open", 0, 0, -1, -1, 0)
child = os.fork()
if child == 0:
    time.sleep(5)
    os._exit(0)
sys("ptrace", 16, child)  # PTRACE_ATTACH
os.kill(child, 9); os.waitpid(child, 0)
def sock(label, *args):
    try:
        socket.socket(*args).close(); print(label, "ALLOWED")
    except OSError as e:
        print(label, "denied", e.errno)
sock("packet", socket.AF_PACKET, socket.SOCK_RAW, 0)
sock("netfilter", socket.AF_NETLINK, socket.SOCK_RAW, 12)
sock("netlink-route", socket.AF_NETLINK, socket.SOCK_RAW, 0)
# What code needs keeps working.
print("subprocess", subprocess.run(["/usr/bin/true"]).returncode)
t = threading.Thread(target=lambda: None); t.start(); t.join(); print("thread ok")
with multiprocessing.Pool(2) as p:
    print("pool", p.map(abs, [-1, -2]))
`, pyDict(nr)), nil, nil)
	for label := range nr {
		if !strings.Contains(r.stdout, label+" denied") {
			t.Errorf("%s was not denied:\n%s\n%s", label, r.stdout, r.stderr)
		}
	}
	for _, w := range []string{"packet denied", "netfilter denied", "netlink-route ALLOWED", "subprocess 0", "thread ok", "pool [1, 2]"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("want %q:\n%s\n%s", w, r.stdout, r.stderr)
		}
	}
}

func pyDict(m map[string]int) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%q: %d", k, v))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// Nothing the code can read names a host path: not the mount table, not
// a command line, not the environment.
func TestSandboxSeesNoHostPaths(t *testing.T) {
	requireRoot(t)
	data := testutil.DataDir(t)
	wd, _ := os.Getwd()
	r := execCode(t, data, "paths", `
import os
for f in ("/proc/self/mountinfo", "/proc/self/mounts", "/proc/1/cmdline", "/proc/1/environ", "/proc/self/cgroup"):
    print(f, open(f, "rb").read())
print("cwd", os.getcwd())
`, nil, nil)
	if r.code != 0 {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	root := filepath.Dir(data)
	for _, leak := range []string{root, wd, "/runs/", "nekro-test-"} {
		for _, line := range strings.Split(strings.ReplaceAll(r.stdout, `\n`, "\n"), "\n") {
			if strings.Contains(line, leak) {
				t.Errorf("the sandbox sees the host path %q: %s", leak, line)
			}
		}
	}
}
