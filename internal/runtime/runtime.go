// Package runtime wires nekro's parts together: the data directory, the
// enabled plugins, the sandbox backend and the per-run RPC servers. The CLI
// and the HTTP server are thin layers over a Runtime.
package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/kv"
	"github.com/nekro-go/nekro/internal/pluginconfig"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/pluginstate"
	"github.com/nekro-go/nekro/internal/registry"
	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/internal/schedule"
	"github.com/nekro-go/nekro/plugin"
)

// Config configures a Runtime. The zero value plus DataDir, DB and Store
// is a working single-machine setup.
type Config struct {
	DataDir string // default "./data"
	// Limits of each run; zero fields take sandbox.DefaultLimits.
	Limits sandbox.Limits
	// CallTimeout bounds one method call unless the method sets its own.
	CallTimeout time.Duration
	// MaxConcurrentRuns bounds sandbox runs across all chats; default 8.
	MaxConcurrentRuns int
	// Plugins to enable; nil means every registered plugin.
	Plugins []*plugin.Plugin
	// WarmSpares keeps one started sandbox per recently active chat so the
	// chat's next run skips sandbox start-up (about 15 ms here). Worth it
	// for a long-running server; a one-shot command leaves it off.
	WarmSpares bool
	// SpareIdle discards a spare unused this long; default
	// DefaultSpareIdle.
	SpareIdle time.Duration
	// MaxSpares bounds the warm sandboxes kept; default 32.
	MaxSpares int
	// SharedIdle empties a sandbox's /app/shared once no run has used it
	// for this long, as the reference does after 30 minutes. Zero keeps
	// the files (one-shot commands); nekro serve sets 30 minutes.
	SharedIdle time.Duration
	// SharedQuota bounds each of a chat's /app/shared and /app/uploads:
	// each lives on a filesystem of this size, so a write past it fails
	// with ENOSPC while the code writes (see package volume). Where
	// volumes are unavailable, a run that leaves more in /app/shared gets
	// it emptied afterwards, with a note. Default DefaultSharedQuota.
	SharedQuota int64
	// SharedInodes bounds the files and directories of each of those
	// filesystems; default DefaultSharedInodes.
	SharedInodes int64
	// PluginDataQuota bounds each plugin's data directory the same way;
	// default DefaultPluginDataQuota.
	PluginDataQuota int64
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
	// DB is the database the chats' sandbox uids are kept in, and Store
	// the plugins' KV store on it; both required, both opened and closed
	// by the caller (see internal/app).
	DB    db.Handle
	Store *kv.Store
	Log   *slog.Logger
	// FireTimers makes this runtime fire plugins' due timers (nekro
	// serve); every runtime may set and list them.
	FireTimers bool
	// TimerTurnsPerHour bounds the turns one chat's timers may wake in
	// any hour (--timer-turns-per-hour); a firing past it adds its
	// message without a turn. 0: no bound.
	TimerTurnsPerHour int
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
	cfg         Config
	layout      files.Layout
	registry    *registry.Registry
	runner      sandbox.Runner
	log         *slog.Logger
	runSlots    chan struct{}
	runsDir     string   // this process's run directories (Docker)
	spares      *spares  // nil unless Config.WarmSpares
	janitor     *janitor // nil unless Config.SharedIdle
	store       *kv.Store
	uids        UIDs // nil when sandboxes run as nekro's own uid
	provision   *provisioner
	bg          sync.WaitGroup
	closeOnce   sync.Once
	stubs       sync.Map                      // method set -> api_caller.py (apiCaller)
	configs     map[string]*pluginconfig.File // by plugin key; set before init hooks, read-only after
	states      *pluginstate.Store            // which plugins the operator turned off
	timers      *schedule.Store               // plugins' timers
	stateMu     sync.Mutex                    // serialises applying state changes
	stopWatch   context.CancelFunc
	pushMu      sync.Mutex
	push        func(ctx context.Context, chatKey, text string, trigger bool) error
	tasksOnce   sync.Once
	bgTasks     *tasks // plugins' background tasks (taskList)
	pkgOnce     sync.Once
	pkgs        []sandbox.Package // the sandbox's well-known packages (Packages)
	pkgErr      error
	pip         *pluginhost.MethodInfo // the host's side of pip install (sandbox.PipMethod)
	pipLocks    sync.Map               // chat key -> *sync.Mutex: one install at a time per chat
	layerMu     sync.Mutex             // serialises trustPackageLayer's first look at a chat's layer
	layers      sync.Map               // container key -> struct{}: layers known to be the installer's alone
	timerWarned sync.Map               // chat key -> time.Time of its last "budget used up" warning
}

// OnPush sets what plugins' Plugin.PushSystem calls (the agent's
// PushSystem); until set, it fails.
func (rt *Runtime) OnPush(f func(ctx context.Context, chatKey, text string, trigger bool) error) {
	rt.pushMu.Lock()
	rt.push = f
	rt.pushMu.Unlock()
}

// Open prepares the data directory, checks the plugins and runs their init
// hooks.
func Open(ctx context.Context, cfg Config) (*Runtime, error) {
	if cfg.DataDir == "" {
		cfg.DataDir = "data"
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Store == nil || (cfg.DB.SQLite == nil && cfg.DB.Postgres == nil) {
		return nil, fmt.Errorf("runtime: a database and a KV store are required (internal/app opens them)")
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
	plugins := cfg.Plugins
	if plugins == nil {
		plugins = pluginhost.Registered()
	}
	reg, err := registry.New(plugins, cfg.Log)
	if err != nil {
		return nil, fmt.Errorf("plugins: %w", err)
	}
	rt := &Runtime{cfg: cfg, layout: layout, registry: reg, log: cfg.Log, store: cfg.Store,
		runSlots: make(chan struct{}, cfg.MaxConcurrentRuns)}
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
		rt.spares = &spares{byKey: map[string]*spare{}, starting: map[string]bool{}, max: cfg.MaxSpares, idle: cfg.SpareIdle}
	}
	rt.provision = newProvisioner(rt)
	rt.layout.Provision = rt.provision
	if err := rt.provision.volumesErr; err != nil && !cfg.NoVolumes {
		cfg.Log.Warn("chat and plugin directories are not bounded while written (/app/shared is only checked after each run, plugin data not at all)",
			"reason", err)
	}
	if cfg.SharedIdle > 0 {
		rt.janitor = newJanitor(rt, cfg.SharedIdle)
	}
	// Settings live in the plugins' data directories, volumes each: they
	// are mounted at once, not one after the other (about 20 ms each).
	rt.configs = map[string]*pluginconfig.File{}
	var cmu sync.Mutex
	var cwg sync.WaitGroup
	for _, p := range reg.Plugins() {
		cwg.Go(func() {
			f, err := openConfig(rt.layout, p)
			if err != nil {
				cfg.Log.Error("plugin settings unavailable: the plugin runs with its defaults", "plugin", p.Key(), "err", err)
				return
			}
			if f != nil {
				cmu.Lock()
				rt.configs[p.Key()] = f
				cmu.Unlock()
			}
		})
	}
	cwg.Wait()
	for _, p := range reg.Plugins() {
		pluginhost.Bind(p, hostServices{rt: rt, p: p})
	}
	if rt.states, err = pluginstate.Open(ctx, cfg.DB); err != nil {
		return nil, err
	}
	if rt.timers, err = schedule.Open(ctx, cfg.DB); err != nil {
		return nil, err
	}
	off, err := rt.states.Disabled(ctx)
	if err != nil {
		return nil, err
	}
	reg.TurnOff(off)
	reg.Init(ctx)
	watch, stop := context.WithCancel(context.WithoutCancel(ctx))
	rt.stopWatch = stop
	rt.bg.Add(1)
	go rt.watchPluginState(watch)
	if cfg.FireTimers {
		rt.bg.Add(1)
		go rt.fireTimers(watch)
	}
	return rt, nil
}

// pluginStatePoll is how often a runtime looks for plugins enabled or
// disabled by another process (nekro plugins enable|disable, a replica).
const pluginStatePoll = time.Second

// watchPluginState applies the operator's enable/disable choices made
// elsewhere until ctx ends.
func (rt *Runtime) watchPluginState(ctx context.Context) {
	defer rt.bg.Done()
	t := time.NewTicker(pluginStatePoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		off, err := rt.states.Disabled(ctx)
		if err != nil {
			if ctx.Err() == nil {
				rt.log.Warn("cannot read which plugins are enabled", "err", err)
			}
			continue
		}
		rt.applyPluginState(ctx, off)
	}
}

// applyPluginState brings the registry to the operator's choices.
func (rt *Runtime) applyPluginState(ctx context.Context, off map[string]bool) {
	rt.stateMu.Lock()
	defer rt.stateMu.Unlock()
	changed := false
	was := rt.registry.Off()
	for _, p := range rt.registry.All() {
		key := p.Key()
		if off[key] == was[key] {
			continue
		}
		if off[key] {
			rt.cancelTasks(key) // a disabled plugin's background work stops
		}
		ok, err := rt.registry.SetEnabled(ctx, key, !off[key])
		if err != nil {
			rt.log.Error("plugin could not be enabled", "plugin", key, "err", err)
		}
		if ok {
			rt.log.Info("plugin state changed", "plugin", key, "enabled", !off[key])
			changed = true
		}
	}
	if changed && rt.spares != nil {
		rt.spares.dropAll() // their stubs list the old method set
	}
}

// SetPluginEnabled turns a plugin on or off, for this runtime at once
// and, through the database, for every nekro process sharing it (they
// follow within a second) and across restarts.
func (rt *Runtime) SetPluginEnabled(ctx context.Context, key string, on bool) error {
	found := false
	for _, p := range rt.registry.All() {
		found = found || p.Key() == key
	}
	if !found {
		return fmt.Errorf("no plugin %s in this runtime (see --plugins)", key)
	}
	if err := rt.states.Set(ctx, key, on); err != nil {
		return err
	}
	off, err := rt.states.Disabled(ctx)
	if err != nil {
		return err
	}
	rt.applyPluginState(ctx, off)
	if on {
		if _, err := rt.registry.Plugin(key); err != nil {
			return err // its init failed
		}
	}
	return nil
}

// Close ends the warm sandboxes and runs the plugins' cleanup hooks. The
// database and the KV store stay open: they are the caller's.
func (rt *Runtime) Close(ctx context.Context) error {
	rt.closeOnce.Do(func() { rt.close(ctx) })
	return nil
}

func (rt *Runtime) close(ctx context.Context) {
	if rt.stopWatch != nil {
		rt.stopWatch()
	}
	rt.stopTasks(ctx)
	if rt.janitor != nil {
		rt.janitor.close()
	}
	if rt.spares != nil {
		rt.spares.close()
	}
	rt.bg.Wait()
	rt.registry.Cleanup(ctx)
	if c, ok := rt.runner.(sandbox.Closer); ok {
		c.Close()
	}
	rt.provision.close()
	if rt.states != nil {
		rt.states.Close()
	}
	if rt.timers != nil {
		rt.timers.Close()
	}
	if rt.runsDir != "" {
		os.Remove(rt.runsDir) // empty unless runs are still going
	}
}

// Registry returns the enabled plugins.
func (rt *Runtime) Registry() *registry.Registry { return rt.registry }

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

// hostServices is what a plugin sees of the runtime outside a run.
type hostServices struct {
	rt *Runtime
	p  *plugin.Plugin
}

func (h hostServices) Store() plugin.Store { return h.rt.store.For(h.p.Key()) }

func (h hostServices) Logger() *slog.Logger { return h.rt.log.With("plugin", h.p.Key()) }

func (h hostServices) ConfigJSON() (json.RawMessage, uint64) {
	f := h.rt.configs[h.p.Key()]
	if f == nil {
		return nil, 0
	}
	return f.JSON()
}

func (h hostServices) PushSystem(ctx context.Context, chatKey, text string, trigger bool) error {
	h.rt.pushMu.Lock()
	push := h.rt.push
	h.rt.pushMu.Unlock()
	if push == nil {
		return plugin.ErrNoService
	}
	return push(ctx, chatKey, text, trigger)
}

func (h hostServices) SetConfig(changes map[string]any) error {
	f := h.rt.configs[h.p.Key()]
	if f == nil {
		return fmt.Errorf("plugin %s: %w", h.p.Key(), pluginconfig.ErrNoConfig)
	}
	_, err := f.Set(changes)
	return err
}

// PluginConfig returns the settings of the enabled plugin with key, or
// nil when it declared none.
func (rt *Runtime) PluginConfig(key string) *pluginconfig.File { return rt.configs[key] }

// openConfig opens p's settings file, data/plugins/<key>/config.yaml,
// writing the defaults when it is missing; nil when p declared none.
func openConfig(layout files.Layout, p *plugin.Plugin) (*pluginconfig.File, error) {
	schema, err := pluginhost.ConfigSchema(p)
	if err != nil || schema == nil {
		return nil, err
	}
	dir, err := layout.EnsurePluginDir(p.Key())
	if err != nil {
		return nil, err
	}
	f, err := pluginconfig.Open(dir, schema)
	if err != nil {
		return nil, err
	}
	if err := f.Err(); err != nil {
		p.Logger().Error("plugin settings file is not valid: the defaults are in force until it is fixed", "err", err)
	}
	return f, nil
}

func (h hostServices) DataDir() (string, error) {
	return h.rt.layout.EnsurePluginDir(h.p.Key())
}
