// Package runtime runs code in the chats' sandboxes: it prepares a chat's
// directories (volumes, package layer), starts a sandbox with the run's
// method stubs and RPC server, keeps warm spares, bounds and observes runs
// and decides how each ended. It knows the plugins only as the methods a
// run is given (ExecRequest.Methods): which plugins are enabled, their
// hooks, settings, timers and tasks are package host's, and what the
// runtime needs from outside (the backend, the chats' uids, the plugins'
// stores) it is given by the assembler, internal/app.
package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/plugin"
)

// Config configures a Runtime. The zero value plus DataDir and Runner is a
// working single-machine setup.
type Config struct {
	DataDir string // default "./data"
	// Limits of each run; zero fields take sandbox.DefaultLimits.
	Limits sandbox.Limits
	// CallTimeout bounds one method call unless the method sets its own.
	CallTimeout time.Duration
	// MaxConcurrentRuns bounds sandbox runs across all chats; default 8.
	MaxConcurrentRuns int
	// WarmSpares keeps one started sandbox per recently active chat so the
	// chat's next run skips sandbox start-up (about 15 ms here). Worth it
	// for a long-running server; a one-shot command leaves it off.
	WarmSpares bool
	// SpareIdle discards a spare unused this long; default
	// DefaultSpareIdle.
	SpareIdle time.Duration
	// MaxSpares bounds the warm sandboxes kept for runs that may come;
	// default 32. A prewarm (Prewarm: a run is coming) evicts the longest
	// idle of them when the pool is full, and starts even when none can
	// go: the runs coming are bounded by their callers.
	MaxSpares int
	// SharedIdle empties a sandbox's /app/shared once no run has used it
	// for this long, as the reference does after 30 minutes. Zero keeps
	// the files (one-shot commands); nekro serve sets 30 minutes.
	SharedIdle time.Duration
	// SharedQuota bounds a chat's /app/shared and /app/uploads together:
	// both live on one filesystem of this size, so a write past it fails
	// with ENOSPC while the code writes (see package volume). (A chat an
	// earlier version gave a filesystem each keeps them, each of this
	// size.) Where volumes are unavailable, a run that leaves more in
	// /app/shared gets it emptied afterwards, with a note. Default
	// DefaultSharedQuota.
	SharedQuota int64
	// SharedInodes bounds the files and directories of that filesystem;
	// default DefaultSharedInodes.
	SharedInodes int64
	// PluginDataQuota bounds each plugin's data directory the same way;
	// default DefaultPluginDataQuota.
	PluginDataQuota int64
	// VolumeIdle unmounts a chat's volumes (freeing their loop devices)
	// once nothing of the chat has used them this long: no run, warm
	// spare or zygote. The next run mounts them again; what they hold
	// stays in their images. Default: SpareIdle, or DefaultSpareIdle.
	VolumeIdle time.Duration
	// MaxVolumes bounds the chat volumes kept mounted: past it, those of
	// the least recently used chats not in use are unmounted before their
	// idle time. Chats in use are never unmounted, so it may be exceeded
	// while more chats than that run at once. Default DefaultMaxVolumes.
	MaxVolumes int
	// NoVolumes keeps chat and plugin directories plain even where
	// volumes could bound them (tests of the fallback).
	NoVolumes bool
	// Runner is the sandbox backend, required: the assembler chooses it
	// (internal/app). The runtime closes it (sandbox.Closer) on Close.
	Runner sandbox.Runner
	// UIDs gives each chat the uid its sandboxes run as, when the Runner
	// runs them as other uids than nekro's own (sandbox.Owner); nil: they
	// run as nekro's own uid.
	UIDs UIDs
	// Files tunes the file bridge: download cap, timeout, and whether
	// downloads may reach private addresses.
	Files files.Options
	// StoreFor gives a run's methods their plugin's KV namespace (the
	// run's chat and user reach it through the scopes of plugin.Ctx);
	// nil leaves runs without a store.
	StoreFor func(*plugin.Plugin) plugin.Store
	// Knowledge searches the knowledge base as a chat (its documents and
	// the global ones) for a run's Ctx.SearchKnowledge; the run's chat key
	// is the host's, never the code's. Nil leaves runs without it.
	Knowledge func(ctx context.Context, chatKey, query string, topK int) ([]plugin.KnowledgePassage, error)
	Log       *slog.Logger
	// Observer, when set, is told how every run ended (nekro's metrics).
	Observer RunObserver
	// PythonIndex is where `pip install` in a run installs from, into the
	// chat's package layer (--python-index): an http(s) URL of a package
	// index or a directory of wheels. Empty: pip install says how to set
	// one. See sandbox.PackagesDir.
	PythonIndex string
}

// Defaults of the disk a chat and a plugin may take.
const (
	DefaultSharedQuota     = 1 << 30
	DefaultSharedInodes    = 100000
	DefaultPluginDataQuota = 1 << 30
)

// DefaultMaxVolumes is Config.MaxVolumes' default: 256 chats' volumes
// (loop devices and filesystems; a chat's is bound at its two
// directories, and a chat from an earlier version has two).
const DefaultMaxVolumes = 256

// DefaultSpareIdle is how long an unused warm sandbox waits for its
// chat's next run (Config.SpareIdle).
const DefaultSpareIdle = 5 * time.Minute

// UIDs gives each chat its own host uid for its sandboxes (uids.Allocator,
// opened by the assembler on the database).
type UIDs interface {
	// UID returns the uid chatKey's sandboxes run as; their gid is the
	// same.
	UID(ctx context.Context, chatKey string) (int, error)
	// String names where the uids come from (nekro doctor says it).
	String() string
}

// Runtime is an open nekro instance.
type Runtime struct {
	cfg    Config
	layout files.Layout
	runner sandbox.Runner
	log    *slog.Logger
	// runSlots bounds the sandbox runs at once, startSlots the warm
	// sandboxes starting at once (Prewarm); the others wait, the oldest
	// work first (slots.go).
	runSlots   *slotPool
	startSlots *slotPool
	// coldRuns counts the runs that started their sandbox themselves,
	// finding none warm.
	coldRuns  atomic.Int64
	runsDir   string   // this process's run directories (Docker)
	spares    *spares  // nil unless Config.WarmSpares
	janitor   *janitor // nil unless Config.SharedIdle
	uids      UIDs     // nil when sandboxes run as nekro's own uid
	provision *provisioner
	bg        sync.WaitGroup
	closeOnce sync.Once
	stubs     sync.Map // method set -> api_caller.py (apiCaller)
	pkgOnce   sync.Once
	pkgs      []sandbox.Package // the sandbox's well-known packages (Packages)
	pkgErr    error
	pip       *pluginhost.MethodInfo // the host's side of pip install (sandbox.PipMethod)
	pipLocks  sync.Map               // chat key -> *sync.Mutex: one install at a time per chat
	layerMu   sync.Mutex             // serialises trustPackageLayer's first look at a chat's layer
	layers    sync.Map               // container key -> struct{}: layers known to be the installer's alone
}

// Open prepares the data directory and the sandbox backend.
func Open(ctx context.Context, cfg Config) (*Runtime, error) {
	if cfg.DataDir == "" {
		cfg.DataDir = "data"
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Runner == nil {
		return nil, fmt.Errorf("runtime: a sandbox backend is required (internal/app chooses it)")
	}
	if cfg.SharedQuota <= 0 {
		cfg.SharedQuota = DefaultSharedQuota
	}
	if cfg.SharedInodes <= 0 {
		cfg.SharedInodes = DefaultSharedInodes
	}
	if cfg.PluginDataQuota <= 0 {
		cfg.PluginDataQuota = DefaultPluginDataQuota
	}
	if cfg.MaxConcurrentRuns <= 0 {
		cfg.MaxConcurrentRuns = 8
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	index, err := pythonIndex(cfg.PythonIndex)
	if err != nil {
		return nil, err
	}
	cfg.PythonIndex = index
	layout, err := files.OpenLayout(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	rt := &Runtime{cfg: cfg, layout: layout, log: cfg.Log, runSlots: newSlotPool(cfg.MaxConcurrentRuns),
		startSlots: newSlotPool(concurrentStarts())}
	rt.pip = rt.newPipMethod()
	rt.runner, rt.uids = cfg.Runner, cfg.UIDs
	if s, ok := rt.runner.(sandbox.Sweeper); ok {
		if err := s.Sweep(ctx); err != nil {
			cfg.Log.Warn("cannot remove sandboxes left by killed hosts", "err", err)
		}
	}
	if err := rt.prepareDataDir(); err != nil {
		return nil, err
	}
	if cfg.WarmSpares {
		if cfg.SpareIdle <= 0 {
			cfg.SpareIdle = DefaultSpareIdle
		}
		if cfg.MaxSpares <= 0 {
			cfg.MaxSpares = 32
		}
		rt.spares = &spares{byKey: map[string]*spare{}, starting: map[string]*starting{}, recent: map[string]recentRuns{},
			max: cfg.MaxSpares, idle: cfg.SpareIdle}
	}
	if cfg.VolumeIdle <= 0 {
		cfg.VolumeIdle = cfg.SpareIdle
		if cfg.VolumeIdle <= 0 {
			cfg.VolumeIdle = DefaultSpareIdle
		}
	}
	if cfg.MaxVolumes <= 0 {
		cfg.MaxVolumes = DefaultMaxVolumes
	}
	rt.cfg.VolumeIdle, rt.cfg.MaxVolumes = cfg.VolumeIdle, cfg.MaxVolumes
	rt.provision = newProvisioner(rt)
	rt.provision.start()
	rt.layout.Provision = rt.provision
	if err := rt.provision.volumesErr; err != nil && !cfg.NoVolumes {
		cfg.Log.Warn("chat and plugin directories are not bounded while written (/app/shared is only checked after each run, plugin data not at all)",
			"reason", err)
	}
	if cfg.SharedIdle > 0 {
		rt.janitor = newJanitor(rt, cfg.SharedIdle)
	}
	return rt, nil
}

// Close ends the warm sandboxes, the backend's own (sandbox.Closer: the
// zygotes) and the janitor, and releases the volumes. Runs still going
// are not waited for. Close the host first: the plugins' cleanup hooks
// may still use their data directories.
func (rt *Runtime) Close(ctx context.Context) error {
	rt.closeOnce.Do(rt.close)
	return nil
}

func (rt *Runtime) close() {
	if rt.janitor != nil {
		rt.janitor.close()
	}
	if rt.spares != nil {
		rt.spares.close()
	}
	rt.bg.Wait()
	if c, ok := rt.runner.(sandbox.Closer); ok {
		c.Close()
	}
	rt.provision.close()
	if rt.runsDir != "" {
		os.Remove(rt.runsDir) // empty unless runs are still going
	}
}

// Layout returns the data directory's layout.
func (rt *Runtime) Layout() files.Layout { return rt.layout }

// Runner returns the sandbox backend.
func (rt *Runtime) Runner() sandbox.Runner { return rt.runner }

// prepareDataDir creates the data directory. Directories the sandbox user
// must reach (to bind-mount them) are traversable but not listable; the
// database and plugin directories stay private.
func (rt *Runtime) prepareDataDir() error {
	root := rt.layout.Root
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{
		{root, 0o711},
		{filepath.Join(root, "plugins"), 0o700},
		{filepath.Join(root, "uploads"), 0o711},
		{filepath.Join(root, "sandboxes"), 0o711},
		{rt.layout.RunsDir(), 0o711},
	} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
	}
	// Run directories live under runs/<host pid>/, so several nekro
	// processes can share a data directory; those of processes that died
	// (killed hosts) are removed here.
	if ents, err := os.ReadDir(rt.layout.RunsDir()); err == nil {
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid <= 0 || syscall.Kill(pid, 0) == syscall.ESRCH {
				os.RemoveAll(filepath.Join(rt.layout.RunsDir(), e.Name()))
			}
		}
	}
	rt.runsDir = filepath.Join(rt.layout.RunsDir(), strconv.Itoa(os.Getpid()))
	if err := os.MkdirAll(rt.runsDir, 0o711); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if err := os.Chmod(rt.runsDir, 0o711); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if c, ok := rt.runner.(sandbox.MountChecker); ok {
		if err := c.CheckMountSource(root); err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
	}
	return nil
}
