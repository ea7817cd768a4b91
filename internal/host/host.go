// Package host hosts the plugins: it keeps the registry of enabled plugins
// and follows the operator's enable/disable choices, binds each plugin's
// services (store, data directory, settings, pushes, timers, background
// tasks), runs their hooks (init and cleanup, per-turn views, message
// signals, channel resets, timers) and gives each run its chat's methods.
//
// It exists apart from package runtime so that running sandboxes and
// hosting plugins depend one way: the host uses the runtime to run code
// (Exec fills a run's methods and screens what it sends), while the
// runtime knows the plugins only as the methods a run is given. The host
// is given its stores opened (internal/app opens and closes them).
package host

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/kv"
	"github.com/nekro-go/nekro/internal/pluginconfig"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/pluginstate"
	"github.com/nekro-go/nekro/internal/registry"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/schedule"
	"github.com/nekro-go/nekro/plugin"
)

// Config configures a Host.
type Config struct {
	// Runtime runs the plugins' code; required. The host does not close
	// it: close the host first, then the runtime.
	Runtime *runtime.Runtime
	// Plugins to enable; nil means every registered plugin.
	Plugins []*plugin.Plugin
	// Installed are the keys of the Plugins the operator installed (the
	// Python plugins of --plugin-dir): one that mounts a method or command
	// name a compiled-in plugin also mounts replaces it, which stays off
	// (registry.Installed).
	Installed []string
	// Store is the plugins' KV store, States which plugins the operator
	// turned off, Timers the plugins' timers; all required, opened and
	// closed by the caller (internal/app).
	Store  *kv.Store
	States *pluginstate.Store
	Timers *schedule.Store
	// FireTimers makes this host fire plugins' due timers (nekro serve);
	// every host may set and list them.
	FireTimers bool
	// TimerTurnsPerHour bounds the turns one chat's timers may wake in
	// any hour (--timer-turns-per-hour); a firing past it adds its
	// message without a turn. 0: no bound.
	TimerTurnsPerHour int
	Log               *slog.Logger
}

// Host is the plugins of an open nekro, hosted.
type Host struct {
	cfg         Config
	rt          *runtime.Runtime
	layout      files.Layout
	registry    *registry.Registry
	log         *slog.Logger
	store       *kv.Store
	states      *pluginstate.Store // which plugins the operator turned off
	timers      *schedule.Store    // plugins' timers
	cfgMu       sync.RWMutex
	configs     map[string]*pluginconfig.File // by plugin key; set before init hooks (and by AddPlugin, SwapPlugin)
	reloadMu    sync.Mutex
	reloader    Reloader   // SetReloader; nil: no plugin reloads
	stateMu     sync.Mutex // serialises applying state changes
	stopWatch   context.CancelFunc
	bg          sync.WaitGroup
	closeOnce   sync.Once
	pushMu      sync.Mutex
	push        func(ctx context.Context, chatKey, text string, trigger bool) error
	tasksOnce   sync.Once
	bgTasks     *tasks   // plugins' background tasks (taskList)
	timerWarned sync.Map // chat key -> time.Time of its last "budget used up" warning
}

// Open checks the plugins, opens their settings, binds their services and
// runs their init hooks (those the operator turned off wait until they
// are enabled).
func Open(ctx context.Context, cfg Config) (*Host, error) {
	if cfg.Runtime == nil || cfg.Store == nil || cfg.States == nil || cfg.Timers == nil {
		return nil, fmt.Errorf("host: a runtime, a KV store, a plugin state store and a timer store are required (internal/app opens them)")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	plugins := cfg.Plugins
	if plugins == nil {
		plugins = pluginhost.Registered()
	}
	reg, err := registry.New(plugins, cfg.Log, registry.Installed(cfg.Installed...))
	if err != nil {
		return nil, fmt.Errorf("plugins: %w", err)
	}
	h := &Host{cfg: cfg, rt: cfg.Runtime, layout: cfg.Runtime.Layout(), registry: reg, log: cfg.Log,
		store: cfg.Store, states: cfg.States, timers: cfg.Timers}
	// Settings live in the plugins' data directories, volumes each: they
	// are mounted at once, not one after the other (about 20 ms each).
	h.configs = map[string]*pluginconfig.File{}
	var cmu sync.Mutex
	var cwg sync.WaitGroup
	for _, p := range reg.Plugins() {
		cwg.Go(func() {
			f, err := openConfig(h.layout, p)
			if err != nil {
				cfg.Log.Error("plugin settings unavailable: the plugin runs with its defaults", "plugin", p.Key(), "err", err)
				return
			}
			if f != nil {
				cmu.Lock()
				h.configs[p.Key()] = f
				cmu.Unlock()
			}
		})
	}
	cwg.Wait()
	for _, p := range reg.Plugins() {
		pluginhost.Bind(p, hostServices{h: h, p: p})
	}
	off, err := h.states.Disabled(ctx)
	if err != nil {
		return nil, err
	}
	reg.TurnOff(off)
	reg.Init(ctx)
	watch, stop := context.WithCancel(context.WithoutCancel(ctx))
	h.stopWatch = stop
	h.bg.Add(1)
	go h.watchPluginState(watch)
	if cfg.FireTimers {
		h.bg.Add(1)
		go h.fireTimers(watch)
	}
	return h, nil
}

// Close stops the background tasks, the timers and the watch of the
// plugins' state, then runs the plugins' cleanup hooks. The runtime and
// the stores stay open: they are the caller's.
func (h *Host) Close(ctx context.Context) error {
	h.closeOnce.Do(func() {
		h.stopWatch()
		h.stopTasks(ctx)
		h.bg.Wait()
		h.registry.Cleanup(ctx)
	})
	return nil
}

// Registry returns the enabled plugins.
func (h *Host) Registry() *registry.Registry { return h.registry }

// Runtime returns the runtime the plugins' code runs in.
func (h *Host) Runtime() *runtime.Runtime { return h.rt }

// OnPush sets what plugins' Plugin.PushSystem calls (the agent's
// PushSystem); until set, it fails.
func (h *Host) OnPush(f func(ctx context.Context, chatKey, text string, trigger bool) error) {
	h.pushMu.Lock()
	h.push = f
	h.pushMu.Unlock()
}

// pushSystem calls what OnPush set.
func (h *Host) pushSystem(ctx context.Context, chatKey, text string, trigger bool) error {
	h.pushMu.Lock()
	push := h.push
	h.pushMu.Unlock()
	if push == nil {
		return plugin.ErrNoService
	}
	return push(ctx, chatKey, text, trigger)
}

// pluginStatePoll is how often a host looks for plugins enabled or
// disabled by another process (nekro plugins enable|disable, a replica).
const pluginStatePoll = time.Second

// watchPluginState applies the operator's enable/disable choices made
// elsewhere until ctx ends.
func (h *Host) watchPluginState(ctx context.Context) {
	defer h.bg.Done()
	t := time.NewTicker(pluginStatePoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		off, err := h.states.Disabled(ctx)
		if err != nil {
			if ctx.Err() == nil {
				h.log.Warn("cannot read which plugins are enabled", "err", err)
			}
			continue
		}
		h.applyPluginState(ctx, off)
	}
}

// applyPluginState brings the registry to the operator's choices.
func (h *Host) applyPluginState(ctx context.Context, off map[string]bool) {
	h.stateMu.Lock()
	defer h.stateMu.Unlock()
	changed := false
	was := h.registry.Off()
	for _, p := range h.registry.All() {
		key := p.Key()
		if off[key] == was[key] {
			continue
		}
		if off[key] {
			h.cancelTasks(key) // a disabled plugin's background work stops
		}
		ok, err := h.registry.SetEnabled(ctx, key, !off[key])
		if err != nil {
			h.log.Error("plugin could not be enabled", "plugin", key, "err", err)
		}
		if ok {
			h.log.Info("plugin state changed", "plugin", key, "enabled", !off[key])
			changed = true
		}
	}
	if changed {
		h.rt.DropSpares() // their stubs list the old method set
	}
}

// SetPluginEnabled turns a plugin on or off, for this host at once and,
// through the database, for every nekro process sharing it (they follow
// within a second) and across restarts.
func (h *Host) SetPluginEnabled(ctx context.Context, key string, on bool) error {
	found := false
	for _, p := range h.registry.All() {
		found = found || p.Key() == key
	}
	if !found {
		return fmt.Errorf("no plugin %s in this runtime (see --plugins)", key)
	}
	if err := h.states.Set(ctx, key, on); err != nil {
		return err
	}
	off, err := h.states.Disabled(ctx)
	if err != nil {
		return err
	}
	h.applyPluginState(ctx, off)
	if on {
		if _, err := h.registry.Plugin(key); err != nil {
			return err // its init failed
		}
	}
	return nil
}

// storeFor gives each plugin its namespace of the KV store; a run's chat
// and user reach it through the scopes of plugin.Ctx.
func (h *Host) storeFor(p *plugin.Plugin) plugin.Store { return h.store.For(p.Key()) }

// hostServices is what a plugin sees of the host outside a run.
type hostServices struct {
	h *Host
	p *plugin.Plugin
}

func (s hostServices) Store() plugin.Store { return s.h.storeFor(s.p) }

func (s hostServices) Logger() *slog.Logger { return s.h.log.With("plugin", s.p.Key()) }

func (s hostServices) ConfigJSON() (json.RawMessage, uint64) {
	f := s.h.PluginConfig(s.p.Key())
	if f == nil {
		return nil, 0
	}
	return f.JSON()
}

func (s hostServices) PushSystem(ctx context.Context, chatKey, text string, trigger bool) error {
	return s.h.pushSystem(ctx, chatKey, text, trigger)
}

func (s hostServices) SetConfig(changes map[string]any) error {
	f := s.h.PluginConfig(s.p.Key())
	if f == nil {
		return fmt.Errorf("plugin %s: %w", s.p.Key(), pluginconfig.ErrNoConfig)
	}
	_, err := f.Set(changes)
	return err
}

func (s hostServices) DataDir() (string, error) {
	return s.h.layout.EnsurePluginDir(s.p.Key())
}
