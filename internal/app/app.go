// Package app is nekro's composition root: the one place that opens the
// database and assembles the KV store, the chat service, the sandbox
// backend and runtime, the plugin host and the agent on it, for every
// command (serve, exec, chats, plugins, kv, doctor, the benches). Each
// part receives what it uses; none opens a database or reads the
// environment for another. The App owns the database and the stores on
// it: the parts built on them never close them.
package app

import (
	"context"
	"errors"
	"fmt"
	"github.com/nekro-go/nekro/internal/llm"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nekro-go/nekro/adapter"
	"github.com/nekro-go/nekro/internal/adapterhost"
	"github.com/nekro-go/nekro/internal/agent"
	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/deliveries"
	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/host"
	"github.com/nekro-go/nekro/internal/knowledge"
	"github.com/nekro-go/nekro/internal/kv"
	"github.com/nekro-go/nekro/internal/kv/kvopen"
	"github.com/nekro-go/nekro/internal/mcp"
	"github.com/nekro-go/nekro/internal/memory"
	"github.com/nekro-go/nekro/internal/metrics"
	"github.com/nekro-go/nekro/internal/models"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/pluginstate"
	"github.com/nekro-go/nekro/internal/presets"
	"github.com/nekro-go/nekro/internal/pyplugin"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/schedule"
	"github.com/nekro-go/nekro/internal/users"
	"github.com/nekro-go/nekro/internal/vector"
	"github.com/nekro-go/nekro/plugin"
)

// Config is what an App is made of. The zero value plus DataDir is a
// working single-machine setup with no model.
type Config struct {
	// DataDir is the data directory; default "data".
	DataDir string
	// DatabaseURL selects the database of the KV store, the chats and the
	// sandbox uids: "" means SQLite in the data directory, "postgres://..."
	// PostgreSQL (see db.Open). The CLI fills it from --database or
	// NEKRO_DATABASE_URL.
	DatabaseURL string
	// SQLite tunes the embedded database.
	SQLite db.SQLiteOptions
	// KV limits the plugins' values.
	KV kv.Limits
	// Runtime configures the sandboxes; its DataDir, Log, StoreFor and
	// Observer are filled in here, and its Runner and UIDs unless set.
	Runtime runtime.Config
	// Sandbox chooses the sandbox backend when Runtime.Runner is nil.
	Sandbox SandboxConfig
	// Host configures the plugins' hosting; its Runtime, stores and Log
	// are filled in here. Its Plugins are the compiled-in plugins to
	// consider (nil: every registered one); the Python ones join them.
	Host host.Config
	// PluginDirs hold Python plugins (--plugin-dir), each run in a process
	// of its own (package pyplugin).
	PluginDirs []string
	// PluginPython is the interpreter of Python plugins; default
	// /usr/bin/python3.
	PluginPython string
	// PythonIndex is where Python plugins' missing packages are installed
	// from (--python-index): a package index URL or a directory of wheels.
	PythonIndex string
	// MCPConfig is the file of MCP servers (--mcp-config), each mounted
	// as a plugin mcp.NAME (package mcp); empty: none.
	MCPConfig string
	// Enable lists the plugin keys to enable (--plugins); nil means all.
	// nekro.basic is always on when compiled in.
	Enable []string
	// LLM names the model; when incomplete the agent answers no turn and
	// says why (runs without a model still work).
	LLM llm.Config
	// ModelGroups are further models by group name, for plugins'
	// Ctx.AskModel (llm.GroupsFromEnv).
	ModelGroups map[string]llm.Config
	// Adapters are the chat platforms to connect (nekro serve only; see
	// package adapter): started after the agent, stopped after it.
	Adapters []adapter.Adapter
	// Memory tunes the long-term memory (--memory and its settings); its
	// Log is filled in here.
	Memory memory.Options

	// Agent tunes turns.
	Agent agent.Config
	Log   *slog.Logger

	// watchPlugins makes the Python plugins follow their files (Serve).
	watchPlugins bool
}

// App is an assembled nekro: everything a command uses.
type App struct {
	Layout  files.Layout
	DB      db.Handle
	Store   *kv.Store
	Chats   *chat.Service
	Runtime *runtime.Runtime
	Host    *host.Host
	Agent   *agent.Agent
	// Adapters are the running chat platform adapters (nil when none).
	Adapters *adapterhost.Set
	// Users are the API's users, their tokens and chat memberships.
	Users *users.Store
	// Deliveries are the webhook deliveries handled lately, so a replayed
	// one runs no handler twice.
	Deliveries *deliveries.Store
	// Metrics are what GET /metrics serves: the runtime, the agent and the
	// model report into them.
	Metrics *metrics.Metrics
	// Model is the default model group's model when nekro opened, ""
	// when none.
	Model string
	// Models are the operator's model groups, in the database: the
	// agent's router, and what /api/models edits.
	Models *models.Store
	// Presets are the operator's personas and each chat's choice.
	Presets *presets.Store
	// PythonFailed says, per file, why a Python plugin did not load.
	PythonFailed map[string]error
	// Python is the loaded Python plugins and their processes.
	Python *pyplugin.Set
	// MCP is the MCP servers of Config.MCPConfig, as plugins.
	MCP *mcp.Set
	// Vectors are the embedding vectors (the knowledge base's and the
	// memories').
	Vectors *vector.DBStore
	// Knowledge is the operator's knowledge base: documents, chunks,
	// hybrid search by scope.
	Knowledge *knowledge.Store
	// Memories are the chats' long-term memories (listed, deleted,
	// erased with a user); Memory learns and recalls them in turns.
	Memories *memory.Store
	Memory   *memory.Service

	log     *slog.Logger
	closers []func(context.Context) error // in opening order
}

func (c *Config) defaults() {
	if c.DataDir == "" {
		c.DataDir = "data"
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

// OpenStore opens the database and the plugin KV store on it, and nothing
// else: what `nekro kv` needs.
func OpenStore(ctx context.Context, cfg Config) (*App, error) {
	cfg.defaults()
	a := &App{log: cfg.Log}
	if err := a.openStore(ctx, cfg); err != nil {
		a.Close(ctx)
		return nil, err
	}
	return a, nil
}

// Open assembles every part. On error, what was opened is closed.
func Open(ctx context.Context, cfg Config) (_ *App, err error) {
	cfg.defaults()
	a := &App{log: cfg.Log}
	defer func() {
		if err != nil {
			a.Close(context.WithoutCancel(ctx))
		}
	}()
	if err := a.openStore(ctx, cfg); err != nil {
		return nil, err
	}
	if a.Chats, err = chat.Open(ctx, a.DB, a.Layout, cfg.Log); err != nil {
		return nil, err
	}
	a.closers = append(a.closers, func(context.Context) error { return a.Chats.Close() })
	// Answers in platform chats wait in the outbox for the replica that
	// holds the platform: this process's adapters, or, on PostgreSQL,
	// another replica's.
	if len(cfg.Adapters) > 0 || a.DB.Postgres != nil {
		a.Chats.SetOutbox(adapter.Owner)
	}
	if a.Users, err = users.Open(ctx, a.DB); err != nil {
		return nil, err
	}
	a.closers = append(a.closers, func(context.Context) error { return a.Users.Close() })
	if a.Deliveries, err = deliveries.Open(ctx, a.DB); err != nil {
		return nil, err
	}
	a.closers = append(a.closers, func(context.Context) error { return a.Deliveries.Close() })

	// Python plugins' processes close after the host, which runs their
	// cleanup hooks.
	plugins, py, ms, err := loadPlugins(ctx, cfg)
	if py != nil {
		a.closers = append(a.closers, func(context.Context) error { return py.Close() })
		a.PythonFailed, a.Python = py.Failed, py
		py.UseHistory(a.Chats.History) // DBChatMessage reads the call's own chat
	}
	if ms != nil { // MCP servers stop after the host, as Python plugins do
		a.closers = append(a.closers, func(context.Context) error { return ms.Close() })
		a.MCP = ms
	}
	if err != nil {
		return nil, err
	}

	rc := cfg.Runtime
	if rc.PythonIndex == "" { // pip install in runs uses the same index
		rc.PythonIndex = cfg.PythonIndex
	}
	store := a.Store
	rc.DataDir, rc.StoreFor = cfg.DataDir, func(p *plugin.Plugin) plugin.Store { return store.For(p.Key()) }
	rc.Knowledge = a.searchKnowledge // a.Knowledge opens with the model groups, below
	a.Metrics = metrics.New()
	rc.Observer = a.Metrics
	if rc.Log == nil {
		rc.Log = cfg.Log
	}
	runner, removeProfile, err := openRunner(a.Layout, rc, cfg.Sandbox, rc.Log)
	if err != nil {
		return nil, err
	}
	rc.Runner = runner
	// The profile goes once the runtime closed: it outlives its sandboxes.
	a.closers = append(a.closers, func(context.Context) error { removeProfile(); return nil })
	if rc.UIDs == nil {
		ids, err := openUIDs(ctx, a.DB, runner, cfg.Sandbox.chatUIDs())
		if err != nil {
			return nil, err
		}
		if ids != nil {
			rc.UIDs = ids
			a.closers = append(a.closers, func(context.Context) error { return ids.Close() })
		}
	}
	if a.Runtime, err = runtime.Open(ctx, rc); err != nil {
		return nil, err
	}
	a.closers = append(a.closers, func(ctx context.Context) error { return a.Runtime.Close(ctx) })
	a.Chats.UseLayout(a.Runtime.Layout()) // attachments land in the chats' mounted, bounded volumes

	hc := cfg.Host
	hc.Runtime, hc.Store, hc.Plugins = a.Runtime, a.Store, plugins
	if py != nil { // the operator's own plugins replace the built-ins they clash with
		hc.Installed = py.Keys()
	}
	if hc.Log == nil {
		hc.Log = cfg.Log
	}
	if hc.States, err = pluginstate.Open(ctx, a.DB); err != nil {
		return nil, err
	}
	a.closers = append(a.closers, func(context.Context) error { return hc.States.Close() })
	if hc.Timers, err = schedule.Open(ctx, a.DB); err != nil {
		return nil, err
	}
	a.closers = append(a.closers, func(context.Context) error { return hc.Timers.Close() })
	if a.Host, err = host.Open(ctx, hc); err != nil {
		return nil, err
	}
	if ms != nil {
		ms.Attach(a.Host) // a server's changed tools list replaces its plugin while nekro runs
	}
	a.closers = append(a.closers, func(ctx context.Context) error {
		// Cleanup hooks run even when the agent used up ctx's time.
		return a.Host.Close(context.WithoutCancel(ctx))
	})
	if cfg.watchPlugins && py != nil {
		// Installed, edited and removed Python plugins are followed; the
		// watch stops before the host closes.
		py.Attach(a.Host)
		a.closers = append(a.closers, func(context.Context) error { py.StopWatching(); return nil })
	}

	ac := cfg.Agent
	if ac.Log == nil {
		ac.Log = cfg.Log
	}
	if err := a.openModels(ctx, cfg, func(m llm.Model) llm.Model { return observedModel{m, a.Metrics} }); err != nil {
		return nil, err
	}
	if err := a.openKnowledge(ctx); err != nil {
		return nil, err
	}
	ac.OnReset = a.eraseChatKnowledge
	if a.Python != nil { // the reference's kb services read the call's chat's documents
		a.Python.UseKnowledge(a.Knowledge)
	}
	if set, err := a.Models.Get(ctx); err == nil {
		for _, g := range set.Groups {
			if g.Name == set.Default {
				a.Model = g.Model
			}
		}
	}
	ac.Router = a.Models
	// Personas: each chat's choice, else the default.
	if a.Presets, err = presets.Open(ctx, a.DB); err != nil {
		return nil, err
	}
	a.closers = append(a.closers, func(context.Context) error { return a.Presets.Close() })
	ac.Persona = func(ctx context.Context, chatKey string) (agent.Persona, error) {
		p, ok, err := a.Presets.ForChat(ctx, chatKey)
		if err != nil || !ok {
			return agent.Persona{}, err
		}
		return agent.Persona{Name: p.Name, Content: p.Content, Lang: p.Lang}, nil
	}
	ac.Observer = a.Metrics
	if err := a.openMemories(ctx); err != nil {
		return nil, err
	}
	mo := cfg.Memory
	if mo.Log == nil {
		mo.Log = cfg.Log
	}
	// The memory's worker stops after the agent, whose last turns queue
	// their extractions; those still queued are dropped.
	a.Memory = memory.NewService(a.Memories, a.Models, a.Chats, mo)
	a.closers = append(a.closers, func(context.Context) error { return a.Memory.Close() })
	if ac.Memory == nil { // tests may give the agent a memory of their own
		ac.Memory = a.Memory
	}
	if a.Python != nil { // the reference's memory query service reads the call's chat's memories
		a.Python.UseMemories(a.Memory)
	}
	// A chat whose turn a full disk cut short waits for space before its
	// model is asked again.
	if ac.Storage == nil {
		root := a.Layout.Root
		ac.Storage = func() error { return files.CheckSpace(root) }
	}
	a.Agent = agent.New(a.Host, a.Chats, nil, ac)
	a.Metrics.Gauge("nekro_turn_queue_depth", "Chats whose messages wait for a turn.",
		func() float64 { return float64(a.Agent.QueueDepth()) })
	a.Metrics.Gauge("nekro_warm_spares", "Started sandboxes waiting for their chat's next run.",
		func() float64 { return float64(a.Runtime.WarmSpares()) })
	// Adapters close after the agent's turns end, so their last answers
	// still go out.
	if len(cfg.Adapters) > 0 {
		a.Adapters = adapterhost.Start(cfg.Adapters, a.Agent, a.Chats, a.Layout, cfg.Runtime.Files.AllowPrivateNetworks, cfg.Log)
		a.closers = append(a.closers, a.Adapters.Close)
		if a.Python != nil { // get_bot asks the run's chat's adapter
			a.Python.UseQueries(a.Adapters.Query)
		}
	}
	a.closers = append(a.closers, a.Agent.Shutdown)
	return a, nil
}

// Plugins returns the plugins cfg enables, compiled-in and Python, with
// nothing else opened: no database, no runtime, no hook run (what
// `nekro plugins` lists). The caller closes the returned set, which holds
// the Python plugins' processes.
func Plugins(ctx context.Context, cfg Config) ([]*plugin.Plugin, *pyplugin.Set, error) {
	cfg.defaults()
	plugins, py, ms, err := loadPlugins(ctx, cfg)
	if ms != nil {
		ms.Close() // listing needs no MCP server running
	}
	return plugins, py, err
}

// loadPlugins starts the Python plugins' processes and chooses the
// enabled plugins, with the MCP servers' (started only if their tools
// were never listed). On error the sets, when not nil, must still be
// closed.
func loadPlugins(ctx context.Context, cfg Config) ([]*plugin.Plugin, *pyplugin.Set, *mcp.Set, error) {
	py, err := pyplugin.Load(ctx, PythonOptions(cfg))
	if err != nil {
		return nil, nil, nil, err
	}
	ms, err := mcp.Load(ctx, mcp.Options{Config: cfg.MCPConfig, StateDir: filepath.Join(cfg.DataDir, "mcp"), Log: cfg.Log})
	if err != nil {
		return nil, py, nil, err
	}
	plugins, err := choosePlugins(cfg, py, ms.Plugins)
	return plugins, py, ms, err
}

// InstalledPluginsDir is where `nekro plugins install` puts plugins when
// no --plugin-dir is given: data/plugins-py. It is searched for Python
// plugins after the --plugin-dir directories, whether or not those are
// given.
func InstalledPluginsDir(dataDir string) string {
	if dataDir == "" {
		dataDir = "data"
	}
	return filepath.Join(dataDir, "plugins-py")
}

// PythonOptions are the options the Python plugins of cfg are loaded with
// (what `nekro plugins install` checks a plugin with).
func PythonOptions(cfg Config) pyplugin.Options {
	cfg.defaults()
	return pyplugin.Options{Dirs: cfg.PluginDirs, InstalledDir: InstalledPluginsDir(cfg.DataDir),
		Python: cfg.PluginPython, Index: cfg.PythonIndex, Memory: cfg.Memory.Enabled,
		CacheDir: filepath.Join(cfg.DataDir, "python"), PluginsDir: filepath.Join(cfg.DataDir, "plugins"), Log: cfg.Log}
}

// choosePlugins joins the compiled-in plugins and the Python ones (a key
// defined by both is an error naming both) and keeps those cfg.Enable
// names (an unknown key is an error). The MCP servers' plugins (mcp.NAME)
// join them the same way.
func choosePlugins(cfg Config, py *pyplugin.Set, mcpPlugins []*plugin.Plugin) ([]*plugin.Plugin, error) {
	goPlugins := cfg.Host.Plugins
	if goPlugins == nil {
		goPlugins = pluginhost.Registered()
	}
	all := map[string]*plugin.Plugin{}
	for _, p := range goPlugins {
		all[p.Key()] = p
	}
	for _, p := range py.Plugins {
		if _, dup := all[p.Key()]; dup {
			return nil, fmt.Errorf("plugin key %s is defined twice: by a compiled-in Go plugin and by %s", p.Key(), py.Paths[p.Key()])
		}
		all[p.Key()] = p
	}
	for _, p := range mcpPlugins {
		if _, dup := all[p.Key()]; dup {
			return nil, fmt.Errorf("plugin key %s is defined twice: by an MCP server of --mcp-config and by another plugin", p.Key())
		}
		all[p.Key()] = p
	}
	var keys []string
	if cfg.Enable == nil {
		for k := range all {
			keys = append(keys, k)
		}
	} else {
		keys = append(keys, cfg.Enable...)
		if _, ok := all["nekro.basic"]; ok {
			keys = append(keys, "nekro.basic")
		}
	}
	sort.Strings(keys)
	var out []*plugin.Plugin
	for i, k := range keys {
		if i > 0 && keys[i-1] == k {
			continue
		}
		p, ok := all[k]
		if !ok {
			return nil, fmt.Errorf("--plugins: unknown plugin %s (not compiled in, and no --plugin-dir holds it)", k)
		}
		out = append(out, p)
	}
	if cfg.Enable == nil {
		out = yieldToBuiltins(out, cfg.Log)
	}
	return out, nil
}

// yieldToBuiltins leaves out of the default set (every plugin) each
// ported document example (nekro_examples.*) that mounts a method name a
// built-in plugin (nekro.*) also mounts: the documents' get_note and the
// note plugin's, for instance. Named in --plugins without the built-in,
// the example is enabled; a clash among plugins the operator named stays
// a start-up error. Only cmd/nekro-examples needs this (the production
// cmd/nekro carries no examples); it stays because that binary still has
// both the kvstore example's get_note and nekro.note's.
func yieldToBuiltins(plugins []*plugin.Plugin, log *slog.Logger) []*plugin.Plugin {
	builtin := map[string]string{}
	for _, p := range plugins {
		if strings.HasPrefix(p.Key(), "nekro.") {
			for _, m := range pluginhost.Methods(p) {
				builtin[m.Name] = p.Key()
			}
		}
	}
	var out []*plugin.Plugin
	for _, p := range plugins {
		clash := ""
		if strings.HasPrefix(p.Key(), "nekro_examples.") {
			for _, m := range pluginhost.Methods(p) {
				if b, ok := builtin[m.Name]; ok {
					clash = fmt.Sprintf("%s() is also %s's", m.Name, b)
					break
				}
			}
		}
		if clash != "" {
			log.Info("document example left out of the default plugins (name it in --plugins to use it)", "plugin", p.Key(), "because", clash)
			continue
		}
		out = append(out, p)
	}
	return out
}

func (a *App) openStore(ctx context.Context, cfg Config) error {
	layout, err := files.OpenLayout(cfg.DataDir)
	if err != nil {
		return err
	}
	a.Layout = layout
	// Sandboxes run as other uids and must traverse to their directories:
	// the data directory (and any parent made here) is 0711, not db.Open's
	// 0700.
	if err := os.MkdirAll(layout.Root, 0o711); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	h, err := db.Open(ctx, cfg.DatabaseURL, layout.Database(), cfg.SQLite)
	if err != nil {
		return err
	}
	a.DB = h
	a.closers = append(a.closers, func(context.Context) error { return h.Close() })
	st, err := kvopen.OpenOn(ctx, h, kvopen.Config{Limits: cfg.KV, SweepEvery: time.Minute, Log: cfg.Log})
	if err != nil {
		return fmt.Errorf("kv store: %w", err)
	}
	a.Store = st
	a.closers = append(a.closers, st.Close)
	return nil
}

// OpenMemories opens the database and the memories' store on it, and
// nothing else: what `nekro memories` and `nekro kv erase-user` need.
func OpenMemories(ctx context.Context, cfg Config) (*App, error) {
	cfg.defaults()
	a := &App{log: cfg.Log}
	if err := a.openStore(ctx, cfg); err != nil {
		a.Close(ctx)
		return nil, err
	}
	if err := a.openMemories(ctx); err != nil {
		a.Close(ctx)
		return nil, err
	}
	return a, nil
}

// openMemories opens the vector store and the memories' store on a.DB.
func (a *App) openMemories(ctx context.Context) error {
	vs, err := a.vectorStore(ctx)
	if err != nil {
		return err
	}
	if a.Memories, err = memory.Open(ctx, a.DB, vs); err != nil {
		return err
	}
	a.closers = append(a.closers, func(context.Context) error { return a.Memories.Close() })
	return nil
}

// Close closes every part in reverse order of opening: the agent lets
// turns finish until ctx ends, the host runs the plugins' cleanup hooks,
// the runtime stops its sandboxes, and the database goes last.
func (a *App) Close(ctx context.Context) error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		if err := a.closers[i](ctx); err != nil {
			errs = append(errs, err)
		}
	}
	a.closers = nil
	return errors.Join(errs...)
}

// openModels opens the model groups. They live in the database, seeded
// by the environment (NEKRO_LLM_*) until the operator edits them; every
// request reads the current ones, so edits need no restart. Their keys
// are sealed in the database with the data directory's models.key: a
// database dump alone shows none, and every command that asks a model
// (serve, knowledge) opens them the same way. wrap, when set, wraps
// every model (serve's metrics).
func (a *App) openModels(ctx context.Context, cfg Config, wrap func(llm.Model) llm.Model) error {
	modelKey, err := models.LoadKey(filepath.Join(a.Layout.Root, models.KeyFile))
	if err != nil {
		return err
	}
	if a.Models, err = models.Open(ctx, a.DB, models.Options{
		Client: llm.Config{Timeout: cfg.LLM.Timeout, MaxRetries: cfg.LLM.MaxRetries, RetryBase: cfg.LLM.RetryBase,
			HTTPClient: cfg.LLM.HTTPClient},
		Wrap: wrap,
		Log:  cfg.Log,
		Key:  modelKey,
	}); err != nil {
		return err
	}
	a.closers = append(a.closers, func(context.Context) error { return a.Models.Close() })
	if err := a.Models.Seed(ctx, models.FromConfigs(cfg.LLM, cfg.ModelGroups, cfg.Log)); err != nil {
		return fmt.Errorf("model groups from the environment: %w", err)
	}
	return nil
}
