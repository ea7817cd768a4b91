// Package sandbox runs untrusted Python code in isolation. The Runner
// interface hides the backend (bubblewrap by default, Docker as an
// option); this package also owns stop types, the release protocol and
// output capping, which every backend shares.
package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"
)

// Spec is one run: which directories the sandbox sees, who it runs as and
// its limits. Backends start Python on /app/.nekro/boot.py with /app as
// working directory, mount SharedDir read-write at /app/shared and
// UploadsDir read-only at /app/uploads, and show nothing else of the
// host's data.
type Spec struct {
	// Files are placed read-only in /app/.nekro by name (boot.py,
	// api_caller.py, chat_key), copied in so that no host path shows in
	// the sandbox. Backends that cannot copy files in (see ConnPasser) get
	// RunDir instead.
	Files map[string][]byte
	// RunDir, for backends that are not ConnPassers, is a host directory
	// holding Files and the run's socket (rpc.sock), mounted read-only at
	// /app/.nekro.
	RunDir string
	// Conn is the sandbox's end of the run's RPC control socket (see
	// rpc.ListenPassed), handed to the sandbox as a descriptor by
	// ConnPassers. The caller closes its copy once Start returns.
	Conn       *os.File
	SharedDir  string
	UploadsDir string
	// UID and GID the sandbox runs as, a chat's own; -1 takes the
	// backend's default. Ignored where the host cannot switch uids.
	UID, GID int
	Limits   Limits
	// Ahead says the sandbox is started ahead of its run (a warm spare):
	// the backend may take longer to start it when that makes the chat's
	// later runs cheaper (bwrap waits for the chat's new zygote).
	Ahead bool
}

// ConnPasser is implemented by backends that start the sandbox as their
// own child and so can hand it descriptors and files: the run then needs
// no directory or socket on the host that anything could reach by path.
type ConnPasser interface {
	PassesConn() bool
}

// Limits bound one run.
type Limits struct {
	Timeout     time.Duration // wall clock; the whole process tree is killed when it passes
	OutputBytes int           // stdout+stderr kept: head and tail, the middle is cut
	MemoryBytes int64         // address-space limit of each process (RLIMIT_AS)
	FileBytes   int64         // largest file the code may write (RLIMIT_FSIZE)
	TmpBytes    int64         // size of the /tmp tmpfs
	Processes   int           // RLIMIT_NPROC of the sandbox user
	Network     bool          // share the host's network namespace; off by default
}

// DefaultLimits are the limits used when a caller sets none.
var DefaultLimits = Limits{
	Timeout:     60 * time.Second,
	OutputBytes: 64 << 10,
	MemoryBytes: 2 << 30,
	FileBytes:   256 << 20,
	TmpBytes:    256 << 20,
	Processes:   1024,
}

// WithDefaults fills zero fields from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits
	if l.Timeout <= 0 {
		l.Timeout = d.Timeout
	}
	if l.OutputBytes <= 0 {
		l.OutputBytes = d.OutputBytes
	}
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.FileBytes <= 0 {
		l.FileBytes = d.FileBytes
	}
	if l.TmpBytes <= 0 {
		l.TmpBytes = d.TmpBytes
	}
	if l.Processes <= 0 {
		l.Processes = d.Processes
	}
	return l
}

// Outcome is what the host observed of a finished run.
type Outcome struct {
	ExitCode  int  // the interpreter's exit status; -1 when killed by a signal
	TimedOut  bool // killed because Limits.Timeout passed
	Cancelled bool // killed because the caller's context ended
	// OutOfMemory is true when the kernel killed a process of the run for
	// exceeding the run's memory limit (backends with per-run cgroups).
	OutOfMemory bool
	Output      string
	Cut         int64 // bytes of output dropped from the middle
	Duration    time.Duration
}

// Runner starts sandboxed runs. Implementations must kill the whole
// process tree when the run times out or ctx ends, and must be safe for
// concurrent use.
//
// A backend that keeps a warm per-chat interpreter (a zygote with a
// pre-forked spare) fits behind the same interface: Start receives
// everything a run needs, and nothing is assumed about how the process is
// started.
type Runner interface {
	// Start launches a sandbox for spec that loads the run's stubs and waits
	// for Process.Release before running any of the code. Starting ahead of
	// need (a warm spare) keeps sandbox start-up off a run's critical path.
	// ctx bounds the start only: the sandbox lives until Wait or Kill.
	Start(ctx context.Context, spec Spec) (Process, error)
	// Check reports whether the backend can run on this machine, with a hint
	// on how to fix it when not.
	Check(ctx context.Context) error
}

// Owner is implemented by runners whose sandboxes run as another host uid
// than nekro's: each chat then gets its own (Spec.UID), and the
// directories its sandbox reads and writes belong to it.
type Owner interface {
	// SandboxUID returns the default uid and gid, or -1, -1 when the
	// sandbox can only act as the host process's own uid (nekro is not
	// root).
	SandboxUID() (uid, gid int)
}

// MountChecker is implemented by runners that need the data directory to
// be reachable in a particular way before they can mount from it.
type MountChecker interface {
	// CheckMountSource returns an error saying how to fix dir if sandboxes
	// cannot mount directories beneath it.
	CheckMountSource(dir string) error
}

// Sweeper is implemented by runners whose sandboxes can outlive a killed
// host (containers): Sweep removes those of hosts that are gone.
type Sweeper interface {
	Sweep(ctx context.Context) error
}

// Process is a started sandbox.
type Process interface {
	// Release hands the sandbox the code and lets it run; ctx bounds the
	// wait for the sandbox to be ready for it.
	Release(ctx context.Context, code []byte) error
	// Wait waits for the run to end, killing its whole process tree when
	// timeout (counted from Release) passes or ctx ends.
	Wait(ctx context.Context, timeout time.Duration) (*Outcome, error)
	// Kill ends the sandbox at once, released or not.
	Kill()
}

// Preparer is implemented by processes with set-up work that can be done
// before the run is known (joining the run's cgroup); a warm spare calls
// Prepare ahead so its run does not wait for it.
type Preparer interface {
	// Prepare waits, at most until ctx ends, for the sandbox to be ready.
	Prepare(ctx context.Context) error
}

// DirHolder is implemented by runners that keep processes with a chat's
// directories mounted between its runs (zygotes): the runtime keeps the
// volumes of those directories mounted while HoldsDir says so, since
// unmounting them would free nothing.
type DirHolder interface {
	// HoldsDir reports whether a process of the runner has sharedDir
	// (Spec.SharedDir of the chat's runs) mounted.
	HoldsDir(sharedDir string) bool
}

// DirReleaser is implemented by runners that keep something of a chat's
// directories between its runs without a process of the chat (a sandbox
// template's base mount namespace), which would keep the filesystems of
// its volumes, and their loop devices, alive after the runtime unmounts
// them: the runtime calls ReleaseDir before it does.
type DirReleaser interface {
	// ReleaseDir lets go of what the runner keeps of the chat whose
	// shared directory (Spec.SharedDir of its runs) is sharedDir, and of
	// its uploads; best effort. Runs then under way keep theirs.
	ReleaseDir(sharedDir string)
}

// Warmer is implemented by runners with work every sandbox shares that
// can be done once, ahead of the first run (matplotlib's font cache):
// Warm starts it in the background, Warmed waits until it is done (or ctx
// ends). A server calls Warm once it is configured, so that its first
// runs neither wait for that work nor compete with it.
type Warmer interface {
	Warm()
	Warmed(ctx context.Context) error
}

// Closer is implemented by runners that hold resources across runs (run
// cgroups being removed): Close waits for them once no run is left.
type Closer interface {
	Close() error
}

// StopType is how a run ended, numbered as in the reference.
type StopType int

// Stop types.
const (
	Normal          StopType = 0
	Error           StopType = 1
	Timeout         StopType = 2
	AgentStop       StopType = 8
	Manual          StopType = 9
	MultimodalAgent StopType = 11
)

func (s StopType) String() string {
	switch s {
	case Normal:
		return "NORMAL"
	case Error:
		return "ERROR"
	case Timeout:
		return "TIMEOUT"
	case AgentStop:
		return "AGENT"
	case Manual:
		return "MANUAL"
	case MultimodalAgent:
		return "MULTIMODAL_AGENT"
	}
	return fmt.Sprintf("StopType(%d)", int(s))
}

// MarshalText encodes the stop type by name.
func (s StopType) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Exit codes the generated stubs use after an ending method call, as in the
// reference.
const (
	ExitAgent           = 8
	ExitManual          = 9
	ExitMultimodalAgent = 11
)

// WriteRelease writes what releases a waiting boot.py: the byte '1', then
// the code, which boot.py reads until the end of the stream. The caller
// closes w after it. The code never touches the host's disk.
func WriteRelease(w io.Writer, code []byte) error {
	buf := make([]byte, 0, 1+len(code))
	buf = append(append(buf, '1'), code...)
	_, err := w.Write(buf)
	return err
}

// Protection is one defence of the sandbox and whether it is in force on
// this machine, for `nekro doctor` and the warnings at start.
type Protection struct {
	Name   string // what it keeps out, e.g. "seccomp filter"
	Active bool
	Detail string // what it covers, or why it is off and how to fix that
}

// Protector is implemented by backends that report their protections.
type Protector interface {
	Protections() []Protection
}

// Prober is implemented by backends that can run a trusted script in a
// sandbox like a run's (same interpreter and libraries, no chat's
// directories), e.g. to find which packages the AI's code can import.
type Prober interface {
	// Probe runs script with the sandbox's python and returns its stdout.
	Probe(ctx context.Context, script string) ([]byte, error)
}
