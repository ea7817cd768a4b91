package bwrap

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/internal/sandbox/stub"
)

// templateUIDs is the range the template tests map; chats get uids from
// its start.
var templateUIDs = UIDRange{First: 1_000_000_000, Last: 1_000_999_999}

// templateRunner returns a runner whose fresh starts come from the
// template, and a data directory with one chat's directories in it,
// owned by uid.
func templateRunner(t *testing.T, uid int) (*Runner, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the sandbox template needs root")
	}
	data := t.TempDir()
	os.Chmod(filepath.Dir(data), 0o711) // as CheckMountSource asks of a data directory
	os.Chmod(data, 0o711)
	for _, d := range []string{"sandboxes", "uploads"} {
		if err := os.MkdirAll(filepath.Join(data, d, "c1"), 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(data, d), 0o711)
		os.Chown(filepath.Join(data, d, "c1"), uid, uid)
	}
	r := New("")
	r.Template, r.TemplateUIDs, r.DataDir = true, templateUIDs, data
	r.TemplateErr = func(err error) { t.Errorf("template: %v", err) }
	t.Cleanup(func() { r.Close() })
	return r, data
}

// templateSpec is a run of chat c1 as uid.
func templateSpec(t *testing.T, data string, uid int) sandbox.Spec {
	t.Helper()
	api, err := stub.APICaller(nil)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"boot.py": stub.Boot(), "api_caller.py": api, "chat_key": []byte("c1")}
	for n, b := range stub.PipShim() {
		files[n] = b
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fds[0])
	conn := os.NewFile(uintptr(fds[1]), "conn")
	t.Cleanup(func() { conn.Close() })
	return sandbox.Spec{Files: files, Conn: conn, SharedDir: filepath.Join(data, "sandboxes", "c1"),
		UploadsDir: filepath.Join(data, "uploads", "c1"), UID: uid, GID: uid,
		Limits: sandbox.Limits{Timeout: 20 * time.Second}}
}

// runSpec runs code in a sandbox of spec and returns its outcome.
func runSpec(t *testing.T, r *Runner, spec sandbox.Spec, code string) *sandbox.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := r.Start(ctx, spec)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	if err := p.Release(ctx, []byte(code)); err != nil {
		p.Kill()
		o, _ := p.Wait(ctx, time.Second)
		if r.tmpl != nil {
			t.Logf("template: %s", r.tmpl.stderr.String())
		}
		t.Fatalf("release: %v: %+v", err, o)
	}
	o, err := p.Wait(ctx, spec.Limits.WithDefaults().Timeout)
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	return o
}

// fromTemplateMark is the first line of the template tests' runs: a
// template's child has ctypes loaded (the template uses it), a fresh
// bwrap interpreter has not.
const fromTemplateMark = "import sys as _s; print('TEMPLATE' if 'ctypes' in _s.modules else 'BWRAP')\n"

// runTemplate runs code in chat c1 and fails unless the template served
// it; it returns the outcome with the mark's line taken off.
func runTemplate(t *testing.T, r *Runner, spec sandbox.Spec, code string) *sandbox.Outcome {
	t.Helper()
	o := runSpec(t, r, spec, fromTemplateMark+code)
	out, ok := strings.CutPrefix(o.Output, "TEMPLATE\n")
	if !ok {
		t.Fatalf("the run did not come from the template: %+v", o)
	}
	o.Output = out
	return o
}

// The isolation of a template's child, as a fresh bwrap sandbox's: the
// chat's uid and no capability, seccomp and no_new_privs, its own PID
// namespace with itself alone, no network but lo, a read-only system, no
// user namespace, no host path and no other chat's files, the exit status
// and the limits of the spec.
func TestTemplateChildIsIsolated(t *testing.T) {
	uid := templateUIDs.First + 5
	r, data := templateRunner(t, uid)
	other := filepath.Join(data, "sandboxes", "c2")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(other, "secret"), []byte("other chat"), 0o644)
	spec := templateSpec(t, data, uid)
	spec.Limits.MemoryBytes, spec.Limits.TmpBytes = 512<<20, 1<<20
	// The first run builds the chat's base mount namespace, the second
	// copies it (its root is the same filesystem): both are isolated.
	var roots [2]float64
	for run := range 2 {
		// The data directory's path, not as a literal: the run's own source
		// is in its memory.
		o := runTemplate(t, r, spec, fmt.Sprintf("DATA = bytes.fromhex(%q).decode()\n", hex.EncodeToString([]byte(data)))+`
import ctypes, gc, json, os, resource, socket, sys
# What the template handed this run (its request: host paths) is
# reachable from no frame and no object.
leaks = []
f = sys._getframe()
while f is not None:
    for v in list(f.f_locals.values()) + list(f.f_globals.values()):
        if isinstance(v, str) and v is not DATA and DATA in v:
            leaks.append(f.f_code.co_name)
    f = f.f_back
for o in gc.get_objects():
    if o is globals():
        continue
    vals = o.values() if isinstance(o, dict) else o if isinstance(o, (list, tuple)) else ()
    for v in vals:
        if isinstance(v, str) and v is not DATA and DATA in v:
            leaks.append(type(o).__name__)
libc = ctypes.CDLL(None, use_errno=True)
def err(ret):
    return 0 if ret == 0 else ctypes.get_errno()
st = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
res = {
    "ids": [os.getuid(), os.geteuid(), os.getgid(), os.getgroups()],
    "caps": [st["CapPrm"], st["CapEff"], st["CapBnd"], st["CapAmb"]],
    "nnp": st["NoNewPrivs"], "seccomp": st["Seccomp"],
    "pids": sorted(p for p in os.listdir("/proc") if p.isdigit()),
    "ifaces": sorted(n for _, n in socket.if_nameindex()),
    "setuid0": err(libc.setuid(0)),
    "userns": err(libc.unshare(0x10000000)),
    "mount": err(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)),
    "ptrace1": err(libc.ptrace(16, 1, None, None)),
    "host": os.path.exists(DATA) or os.path.exists(DATA + "/sandboxes/c2/secret"),
    "root": sorted(os.listdir("/")),
    "mem": resource.getrlimit(resource.RLIMIT_AS)[0],
    "leaks": leaks,
    "rootdev": os.stat("/").st_dev,
    "env": dict(os.environ),
}
for name, path in (("usr", "/usr/nekro-test"), ("rootfs", "/nekro-test"), ("packages", "/app/shared/.packages/x"), ("uploads", "/app/uploads/x"), ("nekro", "/app/.nekro/x")):
    try:
        open(path, "w").close()
        res[name] = 0
    except OSError as e:
        res[name] = e.errno
try:
    with open("/tmp/big", "wb") as f:
        f.write(b"x" * (2 << 20))
    res["tmpfull"] = 0
except OSError as e:
    res["tmpfull"] = e.errno
with open("/app/shared/mine", "w") as f:
    f.write("ok")
print(json.dumps(res))
raise SystemExit(3)
`)
		var res map[string]any
		if err := json.Unmarshal([]byte(strings.TrimSpace(o.Output)), &res); err != nil {
			t.Fatalf("%v: %+v", err, o)
		}
		want := map[string]any{
			"ids":  []any{float64(uid), float64(uid), float64(uid), []any{}},
			"caps": []any{"0000000000000000", "0000000000000000", "0000000000000000", "0000000000000000"},
			"nnp":  "1", "seccomp": "2", "pids": []any{"1"}, "ifaces": []any{"lo"},
			"setuid0": float64(unix.EPERM), "userns": float64(unix.EPERM), "mount": float64(unix.EPERM),
			"ptrace1": float64(unix.EPERM), "host": false,
			"root": []any{"app", "bin", "dev", "etc", "lib", "lib64", "proc", "sbin", "tmp", "usr"},
			"mem":  float64(512 << 20),
			"usr":  float64(unix.EROFS), "rootfs": float64(unix.EROFS), "packages": float64(unix.EROFS), "uploads": float64(unix.EROFS),
			"nekro":   float64(unix.EROFS),
			"tmpfull": float64(unix.ENOSPC), "leaks": []any{},
			// The runs' own environment, a fresh bwrap run's: the
			// template holds it for them.
			"env": setenvs(append(systemArgs(sandbox.DefaultLimits), runEnvArgs()...)),
		}
		for k, v := range want {
			if got := fmt.Sprint(res[k]); got != fmt.Sprint(v) {
				t.Errorf("%s: %s, want %s", k, got, fmt.Sprint(v))
			}
		}
		if o.ExitCode != 3 {
			t.Errorf("exit code %d, want 3", o.ExitCode)
		}
		// The chat's file on the host belongs to the chat's uid.
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(spec.SharedDir, "mine"), &st); err != nil || int(st.Uid) != uid {
			t.Errorf("the run's file: %v, uid %d, want %d", err, st.Uid, uid)
		}
		roots[run], _ = res["rootdev"].(float64)
	}
	if roots[0] != roots[1] {
		t.Errorf("the second run did not copy the first's base (root devices %v)", roots)
	}
}

// setenvs is the environment bwrap's --setenv options in args make.
func setenvs(args []string) map[string]any {
	env := map[string]any{}
	for i := 0; i+2 < len(args); i++ {
		if args[i] == "--setenv" {
			env[args[i+1]] = args[i+2]
			i += 2
		}
	}
	return env
}

// A chat's directory is opened without following a symlink: a shared or
// uploads directory replaced by a link to another chat's (or anywhere)
// fails the run; a package layer replaced by a link is replaced again by
// the host before the template sees it.
func TestTemplateRefusesSymlinkedChatDirectories(t *testing.T) {
	uid := templateUIDs.First + 6
	r, data := templateRunner(t, uid)
	outside := t.TempDir()
	os.Chmod(outside, 0o755)
	os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o644)
	spec := templateSpec(t, data, uid)

	// The package layer: a link to outside goes; the run sees an empty layer.
	os.RemoveAll(filepath.Join(spec.SharedDir, ".packages"))
	if err := os.Symlink(outside, filepath.Join(spec.SharedDir, ".packages")); err != nil {
		t.Fatal(err)
	}
	o := runTemplate(t, r, spec, "import os; print(os.listdir('/app/shared/.packages'))\n")
	if strings.TrimSpace(o.Output) != "[]" {
		t.Errorf("the package layer behind a link: %q", o.Output)
	}

	for _, dir := range []string{spec.SharedDir, spec.UploadsDir} {
		os.Rename(dir, dir+".gone")
		if err := os.Symlink(outside, dir); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		p, err := r.Start(ctx, spec)
		if err == nil {
			err = p.Release(ctx, []byte("import os; print(os.listdir('/app/shared'), os.listdir('/app/uploads'))"))
			o, _ := p.Wait(ctx, 10*time.Second)
			if err == nil || !strings.Contains(o.Output, "without following symlinks") {
				t.Errorf("%s as a link: the run started: %v %+v", dir, err, o)
			}
		}
		cancel()
		os.Remove(dir)
		os.Rename(dir+".gone", dir)
	}
}

// A child that crashes leaves the template serving; a killed template
// takes its runs with it (they end, they do not hang) and the next start
// gets a new one.
func TestTemplateSurvivesCrashesAndRestarts(t *testing.T) {
	uid := templateUIDs.First + 7
	r, data := templateRunner(t, uid)
	spec := templateSpec(t, data, uid)
	o := runTemplate(t, r, spec, "import ctypes; ctypes.string_at(0)\n")
	first := r.tmpl
	if o.ExitCode != -1 && o.ExitCode != 139 {
		t.Errorf("crashed run: exit %d", o.ExitCode)
	}
	if o := runTemplate(t, r, spec, "print('after crash')\n"); !strings.Contains(o.Output, "after crash") || r.tmpl != first {
		t.Fatalf("after a crash: %+v (same template: %v)", o, r.tmpl == first)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := r.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Release(ctx, []byte("import time; print('sleeping', flush=True); time.sleep(60)")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	first.cmd.Process.Kill()
	start := time.Now()
	o, err = p.Wait(ctx, 50*time.Second)
	if err != nil || o.ExitCode != -1 || time.Since(start) > 10*time.Second {
		t.Fatalf("a run of a killed template: %v %+v after %s", err, o, time.Since(start))
	}
	if o := runTemplate(t, r, spec, "print('after restart')\n"); !strings.Contains(o.Output, "after restart") || r.tmpl == first {
		t.Fatalf("after the template was killed: %+v (new template: %v)", o, r.tmpl != first)
	}
}

// A run cannot reach the template: its host pid is not in the run's PID
// namespace, and every signal the run can send stays there.
func TestTemplateRunCannotSignalTheTemplate(t *testing.T) {
	uid := templateUIDs.First + 8
	r, data := templateRunner(t, uid)
	spec := templateSpec(t, data, uid)
	runTemplate(t, r, spec, "pass\n")
	tpid := r.tmpl.cmd.Process.Pid
	o := runTemplate(t, r, spec, fmt.Sprintf(`
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
res = []
for pid in (%d, 0, -1):
    r = libc.kill(pid, signal.SIGKILL) if pid != 0 else libc.kill(-%d, signal.SIGKILL)
    res.append(ctypes.get_errno() if r else 0)
res.append(ctypes.get_errno() if libc.ptrace(16, %d, None, None) else 0)
print(res)
`, tpid, tpid, tpid))
	if want := fmt.Sprintf("[%d, %d, %d, %d]", unix.ESRCH, unix.ESRCH, unix.ESRCH, unix.EPERM); strings.TrimSpace(o.Output) != want {
		t.Errorf("signals from a run: %q", o.Output)
	}
	if !r.tmpl.alive() || r.tmpl.cmd.Process.Pid != tpid {
		t.Fatal("the template died")
	}
}

// Timeouts and output caps hold as with bwrap.
func TestTemplateTimeoutAndOutputCap(t *testing.T) {
	uid := templateUIDs.First + 9
	r, data := templateRunner(t, uid)
	spec := templateSpec(t, data, uid)
	spec.Limits.Timeout, spec.Limits.OutputBytes = time.Second, 4096
	start := time.Now()
	o := runTemplate(t, r, spec, "import subprocess\nsubprocess.Popen(['sleep', '60'])\nwhile True: print('x' * 100)\n")
	if !o.TimedOut || o.ExitCode != -1 || o.Cut == 0 || len(o.Output) > 8192 || time.Since(start) > 15*time.Second {
		t.Errorf("runaway run: timed out %v, exit %d, cut %d, %d bytes kept, %s", o.TimedOut, o.ExitCode, o.Cut, len(o.Output), time.Since(start))
	}
}

func TestTemplateRuns(t *testing.T) {
	uid := templateUIDs.First + 5
	r, data := templateRunner(t, uid)
	o := runTemplate(t, r, templateSpec(t, data, uid), "print('hello', _ck)\n")
	if strings.TrimSpace(o.Output) != "hello c1" || o.ExitCode != 0 {
		t.Fatalf("%+v", o)
	}
}

// Runs started at once each get their own release, output and status:
// the template serves requests one by one, on sockets of their own.
func TestTemplateConcurrentRuns(t *testing.T) {
	uid := templateUIDs.First + 10
	r, data := templateRunner(t, uid)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			o := runTemplate(t, r, templateSpec(t, data, uid), fmt.Sprintf("print('run', %d)\nraise SystemExit(%d)\n", i, i))
			if strings.TrimSpace(o.Output) != fmt.Sprintf("run %d", i) || o.ExitCode != i {
				t.Errorf("run %d: %+v", i, o)
			}
		})
	}
	wg.Wait()
}

// A run with the network keeps the host's network namespace and its
// resolver files, as with bwrap's --share-net; one without has its own.
func TestTemplateRunWithNetwork(t *testing.T) {
	uid := templateUIDs.First + 11
	r, data := templateRunner(t, uid)
	hostNet, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Skip(err)
	}
	_, resolv := os.Stat("/etc/resolv.conf")
	for _, network := range []bool{true, false} {
		spec := templateSpec(t, data, uid)
		spec.Limits.Network = network
		o := runTemplate(t, r, spec, "import os\nprint(os.readlink('/proc/self/ns/net'), os.path.exists('/etc/resolv.conf'))\n")
		ns, hasResolv, _ := strings.Cut(strings.TrimSpace(o.Output), " ")
		wantResolv := "False"
		if network && resolv == nil {
			wantResolv = "True"
		}
		if got := strings.TrimSpace(o.Output); (ns == hostNet) != network || hasResolv != wantResolv {
			t.Errorf("network %v: %q (the host's namespace: %s)", network, got, hostNet)
		}
	}
}

// A template that could not start is tried again after templateRetry,
// not left off until nekro restarts; the failure is told once.
func TestTemplateRetriesAfterAFailedStart(t *testing.T) {
	r, _ := templateRunner(t, templateUIDs.First+9)
	told := 0
	r.TemplateErr = func(error) { told++ }
	python := r.Python
	r.Python = "/nonexistent/python3"
	if r.templateFor(stub.Boot()) != nil || r.TemplateError() == nil {
		t.Fatalf("a template started with no interpreter (err %v)", r.TemplateError())
	}
	r.Python = python
	if r.templateFor(stub.Boot()) != nil {
		t.Fatal("the template was tried again at once")
	}
	defer func(d time.Duration) { templateRetry = d }(templateRetry)
	templateRetry = 0
	if r.templateFor(stub.Boot()) == nil || r.TemplateError() != nil {
		t.Fatalf("the template did not start on the next try: %v", r.TemplateError())
	}
	if told != 1 {
		t.Errorf("the failure was told %d times, want once", told)
	}
}

// A template's runs load the stubs from the byte code the runner
// compiled, as a fresh sandbox's do: without it every run compiled
// api_caller.py again (3-5 ms of CPU a run).
func TestTemplateRunsUseCompiledStubs(t *testing.T) {
	uid := templateUIDs.First + 11
	r, data := templateRunner(t, uid)
	r.CompileRunFiles = true
	spec := templateSpec(t, data, uid)
	caller := []byte("MARK = 'source'\n__all__ = ['MARK']\n\n\ndef _prepare_run():\n    pass\n")
	spec.Files["api_caller.py"] = caller
	code := "print(MARK)\n"
	if o := runTemplate(t, r, spec, code); o.Output != "source\n" {
		t.Fatalf("before any byte code: %+v", o)
	}
	// Once the runner has compiled it, put in its place the byte code of
	// another source: the run must print what only the byte code says.
	other, err := r.compilePyc("api_caller.py", []byte(strings.Replace(string(caller), "'source'", "'bytecode'", 1)))
	if err != nil {
		t.Fatal(err)
	}
	key := makePycKey(r.Python, "api_caller.py", caller)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		r.pyc.mu.Lock()
		e := r.pyc.entries[key]
		ready := e != nil && e.data != nil
		if ready {
			r.pyc.entries[key] = other
		}
		r.pyc.mu.Unlock()
		if ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("api_caller.py was never compiled")
		}
	}
	if o := runTemplate(t, r, spec, code); o.Output != "bytecode\n" {
		t.Fatalf("with byte code: %+v", o)
	}
	// A traceback through the stubs still shows their source lines.
	spec.Files["api_caller.py"] = []byte("__all__ = ['boom']\n\n\ndef _prepare_run():\n    pass\n\n\ndef boom():\n    raise ValueError('from the stubs')\n")
	o := runTemplate(t, r, spec, "import traceback\ntry:\n    boom()\nexcept ValueError:\n    traceback.print_exc()\n")
	if !strings.Contains(o.Output, "raise ValueError('from the stubs')") {
		t.Errorf("the traceback lacks the stubs' line:\n%s", o.Output)
	}
}

// The runs of one chat share a network namespace the template keeps (a
// run's listener is reachable from the chat's other runs, as in a
// zygote's); another chat's runs have their own and reach nothing of it.
func TestTemplateKeepsAChatsNetworkNamespace(t *testing.T) {
	uid := templateUIDs.First + 12
	r, data := templateRunner(t, uid)
	a := templateSpec(t, data, uid)
	b := templateSpec(t, data, uid+1)
	for _, d := range []string{"sandboxes", "uploads"} {
		dir := filepath.Join(data, d, "c2")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chown(dir, uid+1, uid+1)
	}
	b.SharedDir, b.UploadsDir = filepath.Join(data, "sandboxes", "c2"), filepath.Join(data, "uploads", "c2")
	b.Files["chat_key"] = []byte("c2")

	nsOf := func(spec sandbox.Spec) string {
		t.Helper()
		o := runTemplate(t, r, spec, "import os\nprint(os.readlink('/proc/self/ns/net'))\n")
		return strings.TrimSpace(o.Output)
	}
	// The first run's namespace reaches the template while that run
	// starts: a later run gets it.
	prev := nsOf(a)
	for deadline := time.Now().Add(time.Minute); ; {
		ns := nsOf(a)
		if ns == prev {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the chat's runs never shared a network namespace: %s, then %s", prev, ns)
		}
		prev = ns
	}
	if other := nsOf(b); other == prev {
		t.Fatalf("two chats share the network namespace %s", other)
	}

	// A listener of chat c1: its next run connects, chat c2's run cannot.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := filepath.Join(data, "sandboxes", "c1", "listening")
	p, err := r.Start(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	listen := "import socket, time\ns = socket.socket()\ns.bind(('127.0.0.1', 40123))\ns.listen()\n" +
		"open('/app/shared/listening', 'w').close()\nc, _ = s.accept()\nc.sendall(b'same chat')\ntime.sleep(30)\n"
	releaseUntil(ctx, t, p, listen, out, "the listener never listened")
	dial := "import socket\ntry:\n    c = socket.create_connection(('127.0.0.1', 40123), timeout=5)\n    print(c.recv(100).decode())\nexcept OSError as e:\n    print('refused', e.errno)\n"
	if o := runTemplate(t, r, b, dial); !strings.HasPrefix(o.Output, "refused") {
		t.Errorf("another chat reached the chat's listener: %+v", o)
	}
	if o := runTemplate(t, r, a, dial); o.Output != "same chat\n" {
		t.Errorf("the chat's next run did not reach its listener: %+v", o)
	}
}

// templateChatSpec is a run of chat name as uid, its directories made and
// given to uid, its shared directory holding a file "who" naming it.
func templateChatSpec(t *testing.T, data, name string, uid int) sandbox.Spec {
	t.Helper()
	for _, d := range []string{"sandboxes", "uploads"} {
		dir := filepath.Join(data, d, name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chown(dir, uid, uid)
	}
	spec := templateSpec(t, data, uid)
	spec.SharedDir, spec.UploadsDir = filepath.Join(data, "sandboxes", name), filepath.Join(data, "uploads", name)
	spec.Files["chat_key"] = []byte(name)
	if err := os.WriteFile(filepath.Join(spec.SharedDir, "who"), []byte(name), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec
}

// baseProbe is what a run reports of its mount namespace (baseProbeCode).
type baseProbe struct {
	Root   uint64   // the root's device: the base's, shared by the runs that copy it
	Who    string   // /app/shared/who
	Tmp    []string // /tmp, /dev/shm, /dev/pts and /app/.nekro
	Shm    []string
	Pts    []string
	Nekro  []string
	Pids   []string
	PidNS  string
	Mounts []string // mount points, as /proc/self/mountinfo lists them
	RO     []int    // errnos writing the package layer and uploads
}

// baseProbeCode prints a baseProbe, then leaves a file of its own in
// /tmp and /dev/shm and a pty open, and runs then.
const baseProbeCode = `
import json, os
def ls(p):
    return sorted(os.listdir(p))
def ro(p):
    try:
        open(p, "w").close()
        return 0
    except OSError as e:
        return e.errno
print(json.dumps({"Root": os.stat("/").st_dev, "Who": open("/app/shared/who").read(),
    "Tmp": ls("/tmp"), "Shm": ls("/dev/shm"), "Pts": ls("/dev/pts"), "Nekro": ls("/app/.nekro"),
    "Pids": sorted(p for p in os.listdir("/proc") if p.isdigit()), "PidNS": os.readlink("/proc/self/ns/pid"),
    "Mounts": [l.split()[4] for l in open("/proc/self/mountinfo")],
    "RO": [ro("/app/shared/.packages/x"), ro("/app/uploads/x")]}), flush=True)
for p in ("/tmp/mine", "/dev/shm/mine"):
    open(p, "w").write("left by a run")
pty = os.openpty()
`

// probeBase runs baseProbeCode (then code) in spec's chat.
func probeBase(t *testing.T, r *Runner, spec sandbox.Spec, code string) baseProbe {
	t.Helper()
	o := runTemplate(t, r, spec, baseProbeCode+code)
	var p baseProbe
	line, _, _ := strings.Cut(o.Output, "\n")
	if err := json.Unmarshal([]byte(line), &p); err != nil {
		t.Fatalf("%v: %+v", err, o)
	}
	return p
}

// The runs of one chat copy a base mount namespace the template keeps
// (their root is one filesystem), and nothing one run mounted or wrote
// outside the chat's directories is in the next one's, nor in a run
// running at the same time; another chat, or another chat given the same
// uid, gets a base of its own; a chat whose directories changed (a new
// volume, a new directory, a package layer made again) gets a new base
// showing them.
func TestTemplateKeepsAChatsBaseMountNamespace(t *testing.T) {
	uid := templateUIDs.First + 13
	r, data := templateRunner(t, uid)
	a := templateChatSpec(t, data, "c1", uid)
	a.Files["only_the_first_run"] = []byte("x")
	first := probeBase(t, r, a, "")
	delete(a.Files, "only_the_first_run")
	// The first run's base reaches the template while that run starts: a
	// later run gets it.
	var next baseProbe
	for deadline := time.Now().Add(time.Minute); ; {
		next = probeBase(t, r, a, "")
		if next.Root == first.Root {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the chat's runs never shared a base: root %d, then %d", first.Root, next.Root)
		}
		first = next
	}
	// prev is a run whose PID namespace is still alive (its number not
	// given to another).
	clean := func(what string, p baseProbe, prev baseProbe) {
		t.Helper()
		if len(p.Tmp) != 0 || len(p.Shm) != 0 || fmt.Sprint(p.Pts) != "[ptmx]" || slices.Contains(p.Nekro, "only_the_first_run") {
			t.Errorf("%s sees another run's: /tmp %v, /dev/shm %v, /dev/pts %v, /app/.nekro %v", what, p.Tmp, p.Shm, p.Pts, p.Nekro)
		}
		if fmt.Sprint(p.Pids) != "[1]" || p.PidNS == prev.PidNS {
			t.Errorf("%s's /proc: pids %v, namespace %s (the previous run's %s)", what, p.Pids, p.PidNS, prev.PidNS)
		}
		seen := map[string]bool{}
		for _, m := range p.Mounts {
			if seen[m] {
				t.Errorf("%s has two mounts at %s: %v", what, m, p.Mounts)
			}
			seen[m] = true
		}
		if p.RO[0] != int(unix.EROFS) || p.RO[1] != int(unix.EROFS) {
			t.Errorf("%s: the package layer and uploads are writable: %v", what, p.RO)
		}
	}
	clean("the next run", next, first) // the base's /proc holds the first run's PID namespace
	if next.Who != "c1" {
		t.Errorf("the next run's shared directory: %q", next.Who)
	}

	// A run of the chat while another runs: each has its own.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := r.Start(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	live := filepath.Join(a.SharedDir, "live")
	releaseUntil(ctx, t, p, baseProbeCode+"open('/app/shared/live', 'w').close()\nimport time\ntime.sleep(30)\n", live, "the running run never started")
	during := probeBase(t, r, a, "")
	p.Kill()
	o, _ := p.Wait(ctx, 10*time.Second)
	var running baseProbe
	line, _, _ := strings.Cut(o.Output, "\n")
	if err := json.Unmarshal([]byte(line), &running); err != nil {
		t.Fatalf("%v: %+v", err, o)
	}
	if during.Root != first.Root || running.Root != first.Root {
		t.Errorf("two runs at once did not copy the chat's base: roots %d and %d, the base's %d", running.Root, during.Root, first.Root)
	}
	clean("a run beside another", during, running)

	// Another chat; another chat with the same uid (a chat's uid given
	// to another); then the first chat again.
	b := templateChatSpec(t, data, "c2", uid+1)
	if o := probeBase(t, r, b, ""); o.Root == first.Root || o.Who != "c2" {
		t.Errorf("another chat's run: root %d (the first chat's %d), shared %q", o.Root, first.Root, o.Who)
	}
	c := templateChatSpec(t, data, "c3", uid)
	if o := probeBase(t, r, c, ""); o.Root == first.Root || o.Who != "c3" {
		t.Errorf("a chat given the first chat's uid: root %d (the first chat's %d), shared %q", o.Root, first.Root, o.Who)
	}
	if o := probeBase(t, r, a, ""); o.Who != "c1" {
		t.Errorf("the first chat after the other with its uid: shared %q", o.Who)
	}

	// A new volume at the chat's shared directory, then a new directory
	// there, then its package layer made again: each run sees what is
	// there now, the layer read-only.
	// (A base's root device number is another's once the first is gone:
	// a new base is told apart from one still kept, or held by a run.)
	kept := probeBase(t, r, a, "") // its base is kept again
	if err := unix.Mount("tmpfs", a.SharedDir, "tmpfs", 0, "size=1m,mode=0700"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(a.SharedDir, unix.MNT_DETACH) })
	os.Chown(a.SharedDir, uid, uid)
	os.WriteFile(filepath.Join(a.SharedDir, "who"), []byte("c1 on a new volume"), 0o644)
	if o := probeBase(t, r, a, ""); o.Who != "c1 on a new volume" || o.Root == kept.Root {
		t.Errorf("after a new volume: shared %q, root %d (before: %d)", o.Who, o.Root, kept.Root)
	}
	vol := probeBase(t, r, a, "")
	if err := unix.Unmount(a.SharedDir, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	os.Rename(a.SharedDir, a.SharedDir+".old")
	templateChatSpec(t, data, "c1", uid)
	os.WriteFile(filepath.Join(a.SharedDir, "who"), []byte("c1 reset"), 0o644)
	reset := probeBase(t, r, a, "")
	if reset.Who != "c1 reset" || reset.Root == vol.Root {
		t.Errorf("after a new directory: shared %q, root %d (before: %d)", reset.Who, reset.Root, vol.Root)
	}
	probeBase(t, r, a, "")
	layer := filepath.Join(a.SharedDir, sandbox.PackagesDirName)
	if err := os.RemoveAll(layer); err != nil {
		t.Fatal(err)
	}
	if _, err := sandbox.EnsurePackagesDir(a.SharedDir, uid, uid); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(layer, "new"), nil, 0o644)
	layered := probeBase(t, r, a, "print(os.listdir('/app/shared/.packages'))\n")
	if layered.RO[0] != int(unix.EROFS) || layered.Root == reset.Root {
		t.Errorf("after a new package layer: writable %v, root %d (before: %d)", layered.RO, layered.Root, reset.Root)
	}

	// The runtime has the template let go of a chat's base before it
	// unmounts the chat's volumes (sandbox.DirReleaser); another chat's
	// stays.
	other := probeBase(t, r, b, "")
	hold, err := r.Start(ctx, a) // a run of the base, which keeps its root's number
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Kill()
	held := filepath.Join(a.SharedDir, "held")
	if err := hold.Release(ctx, []byte("open('/app/shared/held', 'w').write(str(__import__('os').stat('/').st_dev))\nimport time\ntime.sleep(30)\n")); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(held); err == nil && len(b) > 0 {
			if string(b) != fmt.Sprint(layered.Root) {
				t.Errorf("the holding run did not copy the chat's base: root %s, the base's %d", b, layered.Root)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the holding run never started")
		}
	}
	r.ReleaseDir(a.SharedDir)
	if o := probeBase(t, r, a, ""); o.Root == layered.Root || o.Who != "c1 reset" {
		t.Errorf("after ReleaseDir the chat's run copied the base it had: root %d, shared %q", o.Root, o.Who)
	}
	hold.Kill()
	if o := probeBase(t, r, b, ""); o.Root != other.Root {
		t.Errorf("ReleaseDir of one chat dropped another's base: root %d, before %d", o.Root, other.Root)
	}
}

// releaseUntil releases p with code and waits, up to a minute, for the
// file the code writes once it got as far as the test needs (failing
// with what, and the run's outcome, if it never does).
func releaseUntil(ctx context.Context, t *testing.T, p sandbox.Process, code, file, what string) {
	t.Helper()
	if err := p.Release(ctx, []byte(code)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(file); err == nil {
			return
		}
		if time.Now().After(deadline) {
			o, _ := p.Wait(ctx, time.Second)
			t.Fatalf("%s: %+v", what, o)
		}
	}
}
