// Package bwrap runs sandboxed Python under bubblewrap: Linux namespaces
// without a daemon or root inside the sandbox.
//
// When the host runs as root, bwrap itself is started as an unprivileged
// uid (65534 by default). Started as root with only --uid, the sandbox
// would still be host uid 0 and could, for instance, write global sysctls.
package bwrap

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/internal/sandbox/cgroup"
)

// Runner is the bubblewrap backend of sandbox.Runner.
type Runner struct {
	Bwrap  string // path of bwrap; found on PATH when empty
	Python string // interpreter inside the sandbox; default /usr/bin/python3
	// UID and GID the sandbox runs as when the host is root. Default 65534.
	UID, GID int
	// Cgroups, when set, gives each run a control group limiting its
	// memory and processes as a whole (rlimits bind each process alone).
	Cgroups *cgroup.Manager
	// CgroupsErr says why Cgroups is nil, for `nekro doctor`.
	CgroupsErr error

	removing sync.WaitGroup // groups being removed after their runs
}

// Close waits until the groups of finished runs are removed.
func (r *Runner) Close() error {
	r.removing.Wait()
	return nil
}

// New returns a runner with defaults filled in, and per-run cgroups when
// the host allows them (root, memory and pids controllers).
func New(python string) *Runner {
	if python == "" {
		python = "/usr/bin/python3"
	}
	r := &Runner{Python: python, UID: 65534, GID: 65534}
	r.Cgroups, r.CgroupsErr = cgroup.Detect()
	return r
}

var _ sandbox.Runner = (*Runner)(nil)

// SandboxUID returns the host uid the sandbox's files belong to, or -1 when
// the host is not root (then the sandbox runs as the host's own uid).
func (r *Runner) SandboxUID() (uid, gid int) {
	if os.Geteuid() != 0 {
		return -1, -1
	}
	return r.UID, r.GID
}

// CheckMountSource checks that every parent of dir is traversable by the
// sandbox uid: bwrap runs as that uid and opens the mount sources itself.
func (r *Runner) CheckMountSource(dir string) error {
	uid, _ := r.SandboxUID()
	if uid < 0 {
		return nil
	}
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("parent %s: %w", d, err)
		}
		if st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s is not reachable by the sandbox user (uid %d): %s is not traversable; "+
				"run `chmod o+x %s` or choose another --data directory", dir, uid, d, d)
		}
		if d == "/" {
			return nil
		}
	}
}

var _ sandbox.MountChecker = (*Runner)(nil)
var _ sandbox.Owner = (*Runner)(nil)

func (r *Runner) bwrapPath() (string, error) {
	if r.Bwrap != "" {
		return r.Bwrap, nil
	}
	p, err := exec.LookPath("bwrap")
	if err != nil {
		return "", errors.New("bubblewrap (bwrap) is not installed: run `apt-get install -y bubblewrap`")
	}
	return p, nil
}

// Check verifies that bwrap and the interpreter exist and that a trivial
// sandbox starts.
func (r *Runner) Check(ctx context.Context) error {
	bw, err := r.bwrapPath()
	if err != nil {
		return err
	}
	if _, err := os.Stat(r.Python); err != nil {
		return fmt.Errorf("python interpreter %s: %w (install python3, or set the interpreter)", r.Python, err)
	}
	cmd := exec.CommandContext(ctx, bw, "--unshare-all", "--ro-bind", "/usr", "/usr",
		"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
		"--proc", "/proc", "--dev", "/dev", r.Python, "-c", "pass")
	cmd.SysProcAttr = r.sysProcAttr()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("bwrap cannot start a sandbox here: %v: %s (user namespaces disabled? see kernel.unprivileged_userns_clone)", err, out)
	}
	return nil
}

func (r *Runner) sysProcAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if uid, gid := r.SandboxUID(); uid >= 0 {
		a.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	}
	return a
}

// Args returns the bwrap command line for spec (without the bwrap path).
func (r *Runner) Args(spec sandbox.Spec) []string {
	l := spec.Limits.WithDefaults()
	a := []string{
		"--unshare-all", "--die-with-parent", "--new-session",
		"--clearenv",
		"--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
		"--setenv", "HOME", "/tmp",
		"--setenv", "LANG", "C.UTF-8",
		"--setenv", "MPLCONFIGDIR", "/tmp/.matplotlib",
		"--ro-bind", "/usr", "/usr",
		"--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
		"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
		"--ro-bind-try", "/etc/alternatives", "/etc/alternatives",
		"--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
		"--ro-bind-try", "/etc/localtime", "/etc/localtime",
		"--ro-bind-try", "/etc/mime.types", "/etc/mime.types",
		"--ro-bind-try", "/etc/ssl/certs", "/etc/ssl/certs",
		"--ro-bind-try", "/etc/python3", "/etc/python3",
		"--ro-bind-try", "/etc/python3.11", "/etc/python3.11",
		"--proc", "/proc", "--dev", "/dev",
		// /dev is a tmpfs bwrap sizes at half the host's memory: keep it
		// read-only, with a shared-memory mount as small as /tmp.
		"--size", strconv.FormatInt(l.TmpBytes, 10), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
		"--size", strconv.FormatInt(l.TmpBytes, 10), "--tmpfs", "/tmp",
		"--dir", "/app",
		"--bind", spec.SharedDir, "/app/shared",
		"--ro-bind", spec.UploadsDir, "/app/uploads",
		"--ro-bind", spec.RunDir, "/app/.nekro",
		"--chdir", "/app",
		"--cap-drop", "ALL",
		"--remount-ro", "/",
	}
	if l.Network {
		// --share-net after --unshare-all keeps the host's network namespace.
		a = append([]string{"--unshare-all", "--share-net",
			"--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf",
			"--ro-bind-try", "/etc/hosts", "/etc/hosts"}, a[1:]...)
	}
	// boot.py lowers RLIMIT_AS, FSIZE, NPROC, NOFILE and CORE before the
	// AI's code runs; they bind everything the code starts.
	return append(a, r.Python, "-I", "-B", "-u", "/app/.nekro/boot.py",
		strconv.FormatInt(l.MemoryBytes, 10), strconv.FormatInt(l.FileBytes, 10), strconv.Itoa(l.Processes), "3", "4")
}

// Run runs spec and waits for it to end.
func (r *Runner) Run(ctx context.Context, spec sandbox.Spec) (*sandbox.Outcome, error) {
	return sandbox.Run(ctx, r, spec)
}

// Start launches the sandbox: bwrap sets up the namespaces, Python starts,
// lowers its limits and loads the stubs, then blocks until Release. The
// sandbox is killed if the host dies.
func (r *Runner) Start(spec sandbox.Spec) (sandbox.Process, error) {
	l := spec.Limits.WithDefaults()
	bw, err := r.bwrapPath()
	if err != nil {
		return nil, err
	}
	goR, goW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox release pipe: %w", err)
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		goR.Close()
		goW.Close()
		return nil, fmt.Errorf("sandbox ready pipe: %w", err)
	}
	cmd := exec.Command(bw, r.Args(spec)...)
	// fd 3: boot.py waits on it for the release; fd 4: it says it waits.
	cmd.ExtraFiles = []*os.File{goR, readyW}
	cmd.SysProcAttr = r.sysProcAttr()
	cmd.Dir = "/"
	var group *cgroup.Group
	if r.Cgroups != nil {
		var b [8]byte
		rand.Read(b[:])
		if group, err = r.Cgroups.New("run-"+hex.EncodeToString(b[:]), l.MemoryBytes, l.Processes); err != nil {
			goR.Close()
			goW.Close()
			return nil, err
		}
	}
	proc, err := sandbox.StartProc(cmd, l.OutputBytes)
	goR.Close()
	readyW.Close()
	if err != nil {
		goW.Close()
		readyR.Close()
		if group != nil {
			group.Remove()
		}
		return nil, err
	}
	p := &process{Proc: proc, release: goW, ready: readyR, group: group, memory: l.MemoryBytes, removing: &r.removing}
	if group != nil {
		// Start joining the group while bwrap and Python start up: on
		// cgroup v1 the first move waits for an RCU grace period, which
		// then overlaps the interpreter's start instead of following it.
		// Prepare moves whatever this early move missed.
		p.joined = make(chan struct{})
		go func() {
			defer close(p.joined)
			group.AddTree(proc.Pid())
		}()
	}
	return p, nil
}

// process is one started sandbox.
type process struct {
	*sandbox.Proc
	release  *os.File
	ready    *os.File      // boot.py writes a byte once it waits for the release
	group    *cgroup.Group // nil without cgroups
	memory   int64
	removing *sync.WaitGroup

	joined      chan struct{} // closed when the early move into the group is done
	prepareOnce sync.Once
	prepareErr  error
	removeOnce  sync.Once
}

// Prepare waits until Python waits for the release: then every process of
// the run exists and is moved into the run's group (anything started later
// inherits it). On cgroup v1 that move costs about one RCU grace period
// (~10 ms), so warm spares call Prepare ahead of their run; Release calls
// it when nobody did.
func (p *process) Prepare() error {
	p.prepareOnce.Do(func() {
		b := make([]byte, 1)
		p.ready.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err := p.ready.Read(b)
		p.ready.Close()
		if err != nil {
			p.prepareErr = fmt.Errorf("sandbox never became ready: %w", err)
			return
		}
		if p.group != nil {
			<-p.joined
			p.prepareErr = p.group.AddTree(p.Pid())
		}
	})
	return p.prepareErr
}

func (p *process) Release() error {
	if err := p.Prepare(); err != nil {
		return fmt.Errorf("release sandbox: %w", err)
	}
	p.MarkReleased()
	_, err := p.release.Write([]byte{'1'})
	p.release.Close()
	if err != nil {
		return fmt.Errorf("release sandbox: %w (did it die while waiting?)", err)
	}
	return nil
}

// removeGroup removes the run's group once its processes are gone, off
// the caller's path; the runner's Close waits for it.
func (p *process) removeGroup() {
	if p.group == nil {
		return
	}
	p.removeOnce.Do(func() {
		p.removing.Go(func() {
			for i := 0; i < 100 && p.group.Remove() != nil; i++ {
				time.Sleep(20 * time.Millisecond)
			}
		})
	})
}

func (p *process) Kill() {
	// bwrap leads its own process group; its pid namespace dies with its
	// init, so this takes every process of the run.
	syscall.Kill(-p.Pid(), syscall.SIGKILL)
	p.release.Close()
	p.ready.Close()
	p.removeGroup()
}

func (p *process) Wait(ctx context.Context, timeout time.Duration) (*sandbox.Outcome, error) {
	o, err := p.Proc.Wait(ctx, timeout, p.Kill)
	if p.group != nil {
		if o != nil && p.group.OOMKilled() {
			o.OutOfMemory = true
			o.Output += fmt.Sprintf("\n[nekro: the run exceeded its %d MiB memory limit and was killed]\n", p.memory>>20)
		}
		p.removeGroup()
	}
	return o, err
}
