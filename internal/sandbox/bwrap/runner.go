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
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/internal/sandbox/cgroup"
	"github.com/nekro-go/nekro/internal/sandbox/seccomp"
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
	// Seccomp is the classic BPF program every sandbox is started under
	// (see package seccomp); nil runs without one.
	Seccomp []byte
	// SeccompErr says why Seccomp is nil, for `nekro doctor`.
	SeccompErr error

	// Zygotes, when above zero, keeps up to that many warm per-chat
	// zygotes whose pre-forked spares start runs in about a millisecond
	// (see zygote.go), for chats that run often enough to repay one (see
	// policy.go); zero starts a new sandbox for every run.
	Zygotes int
	// ZygoteMemory bounds the zygotes' memory together (their PSS). At
	// either bound a new zygote replaces only one left unused a while
	// (policy.go). Default 1 GiB.
	ZygoteMemory int64
	// ZygoteIdle stops a zygote unused this long; default 5 minutes.
	ZygoteIdle time.Duration
	// Preload lists the modules a zygote may import once for all its
	// runs: each zygote imports those its chat's code named (those not
	// installed are skipped); nil means DefaultPreload.
	Preload []string
	// ZygoteErr, when set, hears why a zygote ended on its own (its runs
	// then start fresh sandboxes until the next one is up).
	ZygoteErr func(error)
	// FontCache builds matplotlib's font cache once, at Warm or the first
	// start, and gives it to every later sandbox read-only (fonts.go): worth it
	// for a long-running server, where many sandboxes import matplotlib.
	FontCache bool
	// CompileRunFiles compiles boot.py, zygote.py and api_caller.py once
	// per content and starts later sandboxes from the byte code (pyc.go):
	// worth it for a long-running server; a one-shot `nekro exec` would
	// compile for nothing.
	CompileRunFiles bool

	// Template starts fresh sandboxes as children of one shared template
	// process instead of a new bwrap each (template.go); runs it cannot
	// serve, and all runs once it could not start, use bwrap.
	Template bool
	// TemplateUIDs is the chats' uid range: the template's user namespace
	// maps it, and its last uid is the template's own (never a chat's).
	TemplateUIDs UIDRange
	// DataDir is nekro's data directory: the template opens chats'
	// directories beneath it without following symlinks ("" : beneath
	// each directory's parent).
	DataDir string
	// TemplateErr, when set, hears once why the template could not start
	// (its runs then use bwrap).
	TemplateErr func(error)
	// TemplateBoot, when set, is the boot.py of the runs to come: Warm
	// starts the template for it, so a server's first run does not wait
	// for the template's own start.
	TemplateBoot []byte

	removing sync.WaitGroup // groups being removed after their runs
	tmu      sync.Mutex
	tmpl     *template // nil until the first fresh start, or after it died
	tmplOff  error     // why the template is not used
	tmplAt   time.Time // when it last failed to start (templateRetry)
	tclosed  bool
	zmu      sync.Mutex
	zygotes  map[string]*zygote // by chat (shared directory)
	zclosed  bool
	zchats   chats // recent runs of each chat (policy.go)
	fontOnce sync.Once
	fontDone chan struct{}             // closed when the build ended (fonts.go)
	fontStop context.CancelFunc        // stops the build
	fonts    atomic.Pointer[fontCache] // nil until built (fonts.go)
	pyc      pycCache                  // the run files' byte code (pyc.go)
	runFiles runFileCache              // template runs' files as sealed memfds (runfiles.go)
	siteOnce sync.Once
	siteDirs string // what site adds to sys.path, ":"-joined (site.go)
	siteOK   bool
}

// Close stops the zygotes and waits until the groups of finished runs are
// removed.
func (r *Runner) Close() error {
	r.fontOnce.Do(func() {}) // no build starts after this
	if r.fontStop != nil {
		r.fontStop()
	}
	r.stopZygotes()
	r.stopTemplate()
	r.removing.Wait()
	r.runFiles.closeAll()
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
	r.Seccomp, r.SeccompErr = seccomp.Filter()
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
			return fmt.Errorf("%s is not reachable by sandboxes (they run as other uids): %s is not traversable; "+
				"run `chmod o+x %s` or choose another --data directory", dir, d, d)
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
	cmd.SysProcAttr = r.sysProcAttr(-1, -1)
	cmd.Env = bwrapEnv
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("bwrap cannot start a sandbox here: %v: %s (user namespaces disabled? see kernel.unprivileged_userns_clone)", err, out)
	}
	return nil
}

func (r *Runner) sysProcAttr(uid, gid int) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if def, defGID := r.SandboxUID(); def >= 0 {
		if uid < 0 {
			uid, gid = def, defGID
		}
		a.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	}
	return a
}

// bwrapEnv is bwrap's whole environment. bwrap keeps the environment it
// was started with (--clearenv clears only the sandboxed command's), so
// it must never be nekro's: that holds API keys and database URLs.
var bwrapEnv = []string{"PATH=/usr/bin:/bin"}

// Descriptors the sandbox starts with. boot.py knows 3, 4 and 5; bwrap
// reads and closes the seccomp program and the files.
const (
	fdRelease = 3 // boot.py waits on it for the release, then reads the code
	fdReady   = 4 // boot.py writes a byte once it waits
	fdConn    = 5 // the run's RPC control socket (Spec.Conn)
	fdSeccomp = 6 // the seccomp program, when there is one
	fdFiles   = 7 // Spec.Files, in name order
)

// fileNames returns spec.Files' names in the order their descriptors
// follow fdFiles.
func fileNames(spec sandbox.Spec) []string {
	names := make([]string, 0, len(spec.Files))
	for n := range spec.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Args returns the bwrap command line for spec (without the bwrap path).
func (r *Runner) Args(spec sandbox.Spec) []string {
	return r.args(spec, r.fonts.Load())
}

// args is Args with the font cache fc (nil: none) read from the
// descriptor after the files'.
func (r *Runner) args(spec sandbox.Spec, fc *fontCache) []string {
	l := spec.Limits.WithDefaults()
	a := systemArgs(l)
	a = append(a, "--dir", "/app")
	a = append(a, sharedArgs(spec.SharedDir)...)
	a = append(a, "--ro-bind", spec.UploadsDir, "/app/uploads")
	if spec.RunDir != "" {
		a = append(a, "--ro-bind", spec.RunDir, "/app/.nekro")
	}
	for i, name := range fileNames(spec) {
		a = append(a, fileArgs(fdFiles+i, name)...)
	}
	a = append(a, fontArgs(fc, fdFiles+len(spec.Files))...)
	a = append(a, runEnvArgs()...)
	if len(r.Seccomp) > 0 {
		a = append(a, "--seccomp", strconv.Itoa(fdSeccomp))
	}
	a = append(a, "--chdir", "/app", "--cap-drop", "ALL", "--remount-ro", "/")
	if l.Network {
		a = shareNet(a)
	}
	// boot.py lowers RLIMIT_AS, FSIZE, NPROC, NOFILE and CORE before the
	// AI's code runs; they bind everything the code starts.
	conn := -1
	if spec.Conn != nil {
		conn = fdConn
	}
	// -S skips site, half of the interpreter's start; boot.py adds its
	// directories and builtins instead (site.go).
	py := []string{r.Python, "-I", "-B", "-u"}
	dirs, ok := r.sitePaths()
	if ok {
		py = append(py, "-S")
	}
	a = append(a, py...)
	a = append(a, scriptPath(spec.Files, "boot.py"),
		strconv.FormatInt(l.MemoryBytes, 10), strconv.FormatInt(l.FileBytes, 10), strconv.Itoa(l.Processes),
		strconv.Itoa(fdRelease), strconv.Itoa(fdReady), strconv.Itoa(conn))
	if ok {
		a = append(a, dirs)
	}
	return a
}

// sharedArgs mounts the chat's shared directory at /app/shared and, over
// it, the chat's package layer read-only (see sandbox.EnsurePackagesDir,
// which the start calls first): a run reads the packages nekro's
// installer put there and can write none.
func sharedArgs(sharedDir string) []string {
	return []string{"--bind", sharedDir, "/app/shared",
		"--ro-bind", filepath.Join(sharedDir, sandbox.PackagesDirName), sandbox.PackagesDir}
}

// ensureLayer makes the chat's package layer before a sandbox of spec
// mounts it, owned by the uid the sandbox (and the chat's installer) runs
// as.
func (r *Runner) ensureLayer(spec sandbox.Spec) error {
	uid, gid := spec.UID, spec.GID
	if uid < 0 {
		uid, gid = r.SandboxUID()
	}
	_, err := sandbox.EnsurePackagesDir(spec.SharedDir, uid, gid)
	return err
}

// fileArgs places one of Spec.Files, read from descriptor fd; those under
// bin/ (nekro's pip command) are executable. The file is copied into the
// sandbox's root, which the command line then makes read-only (the
// trailing --remount-ro /), rather than bound read-only with
// --ro-bind-data: a mount and a remount for each of the ten or so files,
// about 0.7 ms of a fresh sandbox's CPU together (issue 26).
func fileArgs(fd int, name string) []string {
	perms := "0444"
	if strings.HasPrefix(name, "bin/") {
		perms = "0555"
	}
	return []string{"--perms", perms, "--file", strconv.Itoa(fd), "/app/.nekro/" + name}
}

// runEnvArgs puts nekro's pip (stub.PipShim) ahead of the system's in a
// run's PATH and PYTHONPATH.
func runEnvArgs() []string {
	return []string{"--setenv", "PATH", sandbox.RunPath, "--setenv", "PYTHONPATH", sandbox.RunPythonPath}
}

// shareNet turns systemArgs' leading --unshare-all into one that keeps
// the host's network namespace, with its resolver configuration.
func shareNet(a []string) []string {
	// --share-net after --unshare-all keeps the host's network namespace.
	return append([]string{"--unshare-all", "--share-net",
		"--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf",
		"--ro-bind-try", "/etc/hosts", "/etc/hosts"}, a[1:]...)
}

// systemArgs is what every sandbox of this backend shares: namespaces, a
// clean environment, the read-only system (/usr and the few files of /etc
// Python and its libraries read), /proc, /dev and a /tmp of l.TmpBytes.
// Its first element is --unshare-all (see shareNet).
func systemArgs(l sandbox.Limits) []string {
	return []string{
		// --as-pid-1: the code's interpreter is the namespace's PID 1, so
		// no bwrap process (whose command line names host paths) is
		// visible inside; --disable-userns: no nested user namespace.
		"--unshare-all", "--unshare-user", "--disable-userns", "--as-pid-1",
		"--die-with-parent", "--new-session",
		"--clearenv",
		"--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
		"--setenv", "HOME", "/tmp",
		"--setenv", "LANG", "C.UTF-8",
		// matplotlib: its per-run cache and config directory in the run's
		// /tmp, no display (Agg), Debian's matplotlibrc (kept in /etc,
		// without it matplotlib refuses to import) and fontconfig's
		// configuration (without it fc-list, run by matplotlib's font
		// search, complains on stderr).
		"--setenv", "MPLCONFIGDIR", "/tmp/.matplotlib",
		"--setenv", "MPLBACKEND", "Agg",
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
		"--ro-bind-try", "/etc/matplotlibrc", "/etc/matplotlibrc",
		"--ro-bind-try", "/etc/fonts", "/etc/fonts",
		"--proc", "/proc", "--dev", "/dev",
		// /dev is a tmpfs bwrap sizes at half the host's memory: keep it
		// read-only, with a shared-memory mount as small as /tmp.
		"--size", strconv.FormatInt(l.TmpBytes, 10), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
		"--size", strconv.FormatInt(l.TmpBytes, 10), "--tmpfs", "/tmp",
	}
}

// Probe runs a trusted script in a sandbox like a run's, without any
// chat's directories, and returns its standard output.
func (r *Runner) Probe(ctx context.Context, script string) ([]byte, error) {
	bw, err := r.bwrapPath()
	if err != nil {
		return nil, err
	}
	a := append(systemArgs(sandbox.DefaultLimits), "--chdir", "/tmp", "--cap-drop", "ALL", "--remount-ro", "/",
		r.Python, "-I", "-B", "-c", script)
	cmd := exec.CommandContext(ctx, bw, a...)
	cmd.SysProcAttr = r.sysProcAttr(-1, -1)
	cmd.Env = bwrapEnv
	cmd.Dir = "/"
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("probe the sandbox's python: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

var _ sandbox.Prober = (*Runner)(nil)

// Protections reports the defences of this backend on this machine.
func (r *Runner) Protections() []sandbox.Protection {
	ps := []sandbox.Protection{
		{Name: "clean sandbox environment", Active: true,
			Detail: "bwrap starts with no environment of nekro's and the code is the sandbox's PID 1: no host secret, command line or host path in /proc"},
		{Name: "RPC by descriptor", Active: true,
			Detail: "a run reaches the host through a socket handed to it; there is no path anything else could connect to"},
		{Name: "no nested user namespaces", Active: true, Detail: "bwrap --disable-userns"},
	}
	seccompDetail := "denies " + strings.Join(seccomp.Denied(), "; ")
	if r.Seccomp == nil {
		seccompDetail = fmt.Sprintf("off: %v", r.SeccompErr)
	}
	ps = append(ps, sandbox.Protection{Name: "seccomp filter", Active: r.Seccomp != nil, Detail: seccompDetail})
	if r.Template {
		if err := r.TemplateError(); err != nil {
			ps = append(ps, sandbox.Protection{Name: "sandbox template", Detail: fmt.Sprintf("off (%v): fresh sandboxes start a new bwrap each", err)})
		} else {
			ps = append(ps, sandbox.Protection{Name: "sandbox template", Active: true,
				Detail: "fresh sandboxes fork from one template in a user namespace of its own; chats' directories opened without following symlinks"})
		}
	}
	if r.Cgroups != nil {
		ps = append(ps, sandbox.Protection{Name: "per-run cgroups", Active: true, Detail: "memory and processes are limited per run, not only per process"})
	} else {
		ps = append(ps, sandbox.Protection{Name: "per-run cgroups", Detail: fmt.Sprintf("off (%v): memory and process limits bind each process alone", r.CgroupsErr)})
	}
	return ps
}

var _ sandbox.Protector = (*Runner)(nil)
var _ sandbox.Closer = (*Runner)(nil)

// PassesConn reports that this backend hands the sandbox Spec.Conn and
// Spec.Files as descriptors.
func (r *Runner) PassesConn() bool { return true }

var _ sandbox.ConnPasser = (*Runner)(nil)

// memFile returns an in-memory file holding b, read from its start: how
// bwrap receives the seccomp program and the run's files.
func memFile(name string, b []byte) (*os.File, error) {
	return newMemFile(name, b, 0)
}

// newMemFile is memFile with the seals given added once b is written (0:
// none).
func newMemFile(name string, b []byte, seals int) (*os.File, error) {
	flags := unix.MFD_CLOEXEC
	if seals != 0 {
		flags |= unix.MFD_ALLOW_SEALING
	}
	fd, err := unix.MemfdCreate(name, flags)
	if err != nil {
		return nil, fmt.Errorf("memfd %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("memfd %s: %w", name, err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("memfd %s: %w", name, err)
	}
	if seals != 0 {
		if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, seals); err != nil {
			f.Close()
			return nil, fmt.Errorf("memfd %s: seal: %w", name, err)
		}
	}
	return f, nil
}

// Start launches the sandbox: bwrap sets up the namespaces, Python starts,
// lowers its limits and loads the stubs, then blocks until Release. The
// sandbox is killed if the host dies.
func (r *Runner) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start sandbox: %w", err)
	}
	r.startFontCache()
	if p := r.fromZygote(ctx, spec); p != nil {
		return p, nil
	}
	return r.startFresh(ctx, spec)
}

// startFresh starts a sandbox of its own for spec: a new bwrap and Python.
func (r *Runner) startFresh(ctx context.Context, spec sandbox.Spec) (sandbox.Process, error) {
	if p, ok, err := r.fromTemplate(ctx, spec); ok {
		return p, err
	}
	l := spec.Limits.WithDefaults()
	bw, err := r.bwrapPath()
	if err != nil {
		return nil, err
	}
	if err := r.ensureLayer(spec); err != nil {
		return nil, fmt.Errorf("start sandbox: %w", err)
	}
	spec.Files = r.withPyc(spec.Files)
	var parentEnds, childEnds []*os.File // closed here after the start
	defer func() {
		for _, f := range childEnds {
			f.Close()
		}
	}()
	fail := func(err error) (sandbox.Process, error) {
		for _, f := range parentEnds {
			f.Close()
		}
		return nil, err
	}
	goR, goW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox release pipe: %w", err)
	}
	childEnds, parentEnds = append(childEnds, goR), append(parentEnds, goW)
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return fail(fmt.Errorf("sandbox ready pipe: %w", err))
	}
	childEnds, parentEnds = append(childEnds, readyW), append(parentEnds, readyR)
	// ExtraFiles[i] is descriptor 3+i in the sandbox; a nil entry leaves
	// that number closed.
	extra := []*os.File{goR, readyW, spec.Conn, nil}
	if len(r.Seccomp) > 0 {
		f, err := memFile("nekro-seccomp", r.Seccomp)
		if err != nil {
			return fail(err)
		}
		childEnds = append(childEnds, f)
		extra[fdSeccomp-3] = f
	}
	for _, name := range fileNames(spec) {
		f, err := memFile("nekro-"+name, spec.Files[name])
		if err != nil {
			return fail(err)
		}
		childEnds = append(childEnds, f)
		extra = append(extra, f)
	}
	fc := r.fonts.Load()
	if fc != nil {
		f, err := memFile("nekro-fontlist", fc.data)
		if err != nil {
			return fail(err)
		}
		childEnds = append(childEnds, f)
		extra = append(extra, f)
	}
	cmd := exec.Command(bw, r.args(spec, fc)...)
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = r.sysProcAttr(spec.UID, spec.GID)
	cmd.Env = bwrapEnv
	cmd.Dir = "/"
	var group *cgroup.Group
	if r.Cgroups != nil {
		var b [8]byte
		rand.Read(b[:])
		// The host pid in the name tells whose run a group was.
		name := fmt.Sprintf("run-%d-%s", os.Getpid(), hex.EncodeToString(b[:]))
		if group, err = r.Cgroups.New(name, l.MemoryBytes, l.Processes); err != nil {
			return fail(err)
		}
	}
	proc, err := sandbox.StartProc(cmd, l.OutputBytes)
	if err != nil {
		if group != nil {
			group.Remove()
		}
		return fail(err)
	}
	p := &process{Proc: proc, release: goW, ready: readyR, group: group, memory: l.MemoryBytes, removing: &r.removing}
	if spec.Conn != nil && spec.RunDir == "" {
		p.noteRun = func(code []byte) { r.noteRun(spec.SharedDir, code) }
	}
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
	noteRun  func(code []byte) // tells the zygote policy of the run; nil: nothing to tell

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
func (p *process) Prepare(ctx context.Context) error {
	p.prepareOnce.Do(func() {
		if p.prepareErr = awaitReady(ctx, p.ready); p.prepareErr != nil {
			return
		}
		if p.group != nil {
			<-p.joined
			p.prepareErr = p.group.AddTree(p.Pid())
		}
	})
	return p.prepareErr
}

func (p *process) Release(ctx context.Context, code []byte) error {
	if err := p.Prepare(ctx); err != nil {
		return fmt.Errorf("release sandbox: %w", err)
	}
	p.MarkReleased()
	err := sandbox.WriteRelease(p.release, code)
	p.release.Close()
	if err != nil {
		return fmt.Errorf("release sandbox: %w (did it die while waiting?)", err)
	}
	if p.noteRun != nil {
		p.noteRun(code)
	}
	return nil
}

// groupRemoval is how long a run's cgroup is waited for (and its
// processes killed again) before the next start's sweep is left to remove
// it.
const groupRemoval = 30 * time.Second

// removeGroup removes the run's group once its processes are gone, off
// the caller's path; the runner's Close waits for it.
func (p *process) removeGroup() {
	if p.group == nil {
		return
	}
	p.removeOnce.Do(func() {
		p.removing.Go(func() { p.group.RemoveWhenEmpty(groupRemoval) })
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
		if o != nil {
			noteOutOfMemory(o, p.group, p.memory)
		}
		p.removeGroup()
	}
	return o, err
}

// awaitReady reads the byte boot.py writes to ready once it waits for the
// release, and closes ready. The read ends when Python is ready, when the
// sandbox dies (the pipe closes) or when ctx ends.
func awaitReady(ctx context.Context, ready *os.File) error {
	stop := context.AfterFunc(ctx, func() { ready.SetReadDeadline(time.Now()) })
	_, err := ready.Read(make([]byte, 1))
	stop()
	ready.Close()
	if err != nil {
		return fmt.Errorf("sandbox never became ready: %w", err)
	}
	return nil
}

// noteOutOfMemory marks o, and says so in its output, when the kernel
// killed a process of the run's group g for exceeding its memory limit
// of memory bytes.
func noteOutOfMemory(o *sandbox.Outcome, g *cgroup.Group, memory int64) {
	if g.OOMKilled() {
		o.OutOfMemory = true
		o.Output += fmt.Sprintf("\n[nekro: the run exceeded its %d MiB memory limit and was killed]\n", memory>>20)
	}
}
