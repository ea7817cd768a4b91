package seccomp_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nekro-go/nekro/internal/sandbox/seccomp"
)

func TestFilterIsWellFormed(t *testing.T) {
	prog, err := seccomp.Filter()
	if err != nil {
		t.Fatal(err)
	}
	if len(prog)%8 != 0 || len(prog)/8 >= 4096 || len(prog) == 0 {
		t.Fatalf("program of %d bytes", len(prog))
	}
	n := len(prog) / 8
	for i := 0; i < n; i++ {
		code := uint16(prog[8*i]) | uint16(prog[8*i+1])<<8
		jt, jf := int(prog[8*i+2]), int(prog[8*i+3])
		if code&0x07 == unix.BPF_JMP && (i+1+jt >= n || i+1+jf >= n) {
			t.Errorf("instruction %d jumps out of the program", i)
		}
	}
	last := prog[len(prog)-8:]
	if last[0]&0x07 != unix.BPF_RET {
		t.Errorf("the program does not end with a return")
	}
	profile, err := seccomp.DockerProfile()
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		DefaultAction string
		Syscalls      []struct{ Names []string }
	}
	if err := json.Unmarshal(profile, &p); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range p.Syscalls {
		for _, n := range s.Names {
			names[n] = true
		}
	}
	for _, want := range []string{"ptrace", "unshare", "bpf", "mount", "io_uring_setup", "keyctl", "clone", "socket", "clone3", "open_by_handle_at"} {
		if !names[want] {
			t.Errorf("the Docker profile does not name %s", want)
		}
	}
	if len(seccomp.Denied()) == 0 {
		t.Error("Denied is empty")
	}
}

// attack is run in a minimal bubblewrap sandbox, with and without the
// filter: each line says whether an attack was denied, and whether what
// Python code needs still works.
const attack = `
import ctypes, os, platform, socket, subprocess, threading, multiprocessing, time, tempfile, sqlite3, asyncio, json, hashlib, zlib, ssl
libc = ctypes.CDLL(None, use_errno=True)
NR = {"x86_64": {"unshare": 272, "ptrace": 101, "bpf": 321, "io_uring_setup": 425, "keyctl": 250, "mount": 165,
                 "perf_event_open": 298, "clone": 56, "process_vm_readv": 310, "open_by_handle_at": 304},
      "aarch64": {"unshare": 97, "ptrace": 117, "bpf": 280, "io_uring_setup": 425, "keyctl": 219, "mount": 40,
                  "perf_event_open": 241, "clone": 220, "process_vm_readv": 270, "open_by_handle_at": 265}}[platform.machine()]
def sys(label, *args):
    r = libc.syscall(NR[label], *[ctypes.c_long(a) for a in args])
    e = ctypes.get_errno()
    print(label, "denied" if r == -1 and e == 1 else "ALLOWED", flush=True)
    return r
sys("unshare", 0x10000000)
r = sys("clone", 0x10000000 | 17, 0, 0, 0, 0)  # CLONE_NEWUSER | SIGCHLD
if r == 0:
    os._exit(0)
elif r > 0:
    os.waitpid(r, 0)
sys("bpf", 0, 0, 0)
sys("keyctl", 0, 0)
sys("mount", 0, 0, 0, 0, 0)
sys("io_uring_setup", 1, 0)
sys("perf_event_open", 0, 0, -1, -1, 0)
sys("open_by_handle_at", 0, 0, 0)
child = os.fork()
if child == 0:
    time.sleep(5)
    os._exit(0)
sys("ptrace", 16, child)
sys("process_vm_readv", child, 0, 0, 0, 0, 0)
os.kill(child, 9); os.waitpid(child, 0)
def sock(label, *args):
    try:
        socket.socket(*args).close(); print(label, "ALLOWED")
    except OSError as e:
        print(label, "denied", e.errno)
sock("packet", socket.AF_PACKET, socket.SOCK_RAW, 0)
sock("netfilter", socket.AF_NETLINK, socket.SOCK_RAW, 12)
sock("netlink-route", socket.AF_NETLINK, socket.SOCK_RAW, 0)
print("subprocess", subprocess.run(["/usr/bin/true"]).returncode)
t = threading.Thread(target=lambda: None); t.start(); t.join(); print("thread ok")
with multiprocessing.Pool(2) as p:
    print("pool", p.map(abs, [-1, -2]))
a, b = socket.socketpair(); a.send(b"x"); print("socketpair", b.recv(1))
with tempfile.TemporaryFile() as f: f.write(b"x"); print("tempfile ok")
print("sqlite", sqlite3.connect(":memory:").execute("select 1").fetchone())
async def main(): await asyncio.sleep(0); return "ok"
print("asyncio", asyncio.run(main()))
try:
    socket.getaddrinfo("localhost", 80)
except OSError:
    pass
print("getaddrinfo survived")
import numpy
print("numpy", int(numpy.linalg.inv(numpy.eye(3)).sum()))
`

func runSandboxed(t *testing.T, prog []byte) string {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("bwrap is missing: make test installs it")
		}
		t.Skip("bwrap is not installed")
	}
	args := []string{"--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
		"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
		"--ro-bind-try", "/etc/alternatives", "/etc/alternatives",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/dev/shm", "--tmpfs", "/tmp", "--cap-drop", "ALL"}
	var extra []*os.File
	if prog != nil {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		go func() { w.Write(prog); w.Close() }()
		defer r.Close()
		extra = []*os.File{r}
		args = append(args, "--seccomp", "3")
	}
	cmd := exec.Command("bwrap", append(args, "/usr/bin/python3", "-I", "-c", attack)...)
	cmd.ExtraFiles = extra
	cmd.Env = []string{"PATH=/usr/bin"}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("sandboxed python: %v\n%s", err, out.String())
	}
	return out.String()
}

func TestFilterDeniesAttacksAndKeepsPythonWorking(t *testing.T) {
	prog, err := seccomp.Filter()
	if err != nil {
		t.Fatal(err)
	}
	out := runSandboxed(t, prog)
	for _, w := range []string{"unshare denied", "clone denied", "bpf denied", "keyctl denied", "mount denied",
		"io_uring_setup denied", "perf_event_open denied", "open_by_handle_at denied", "ptrace denied",
		"process_vm_readv denied", "packet denied", "netfilter denied", "netlink-route ALLOWED",
		"subprocess 0", "thread ok", "pool [1, 2]", "socketpair b'x'", "tempfile ok", "sqlite (1,)", "asyncio ok",
		"getaddrinfo survived", "numpy 3"} {
		if !strings.Contains(out, w) {
			t.Errorf("with the filter, want %q:\n%s", w, out)
		}
	}
	// Without it, the same sandbox lets the namespace and netlink attacks
	// through: the filter is what stops them.
	out = runSandboxed(t, nil)
	for _, w := range []string{"unshare ALLOWED", "netfilter ALLOWED", "ptrace ALLOWED"} {
		if !strings.Contains(out, w) {
			t.Errorf("without the filter, want %q (the control):\n%s", w, out)
		}
	}
}
