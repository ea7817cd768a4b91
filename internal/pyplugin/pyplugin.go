// Package pyplugin runs plugins written in Python to the Nekro Agent plugin
// documents next to Go plugins, the way Dify's plugin daemon runs Python
// plugins out of process.
//
// Each plugin (a *.py file or a package directory with __init__.py, in a
// --plugin-dir directory, defining a module-level `plugin`) gets a Python
// process of its own on the host, outside any sandbox (host trust, as in
// the reference), running nekro_agent._host from the nekro_agent package
// embedded in the binary. The process describes the plugin; nekro turns it
// into a *plugin.Plugin with the same registry, key space, stubs and
// prompt as Go plugins. Calls and hooks go to the process, and every store,
// message and log call comes back to nekro over the same socket, with the
// framing of the sandbox RPC (newline-delimited JSON, no pickle): a value a
// Python plugin writes is the value `nekro kv` and Go code read.
//
// A plugin that raises fails that call; one that hangs past the call's
// deadline or kills its process fails the calls in flight, and its process
// is restarted (its init hook runs again): at once when sandbox calls were
// in flight, whose chat is refused for a while if it keeps doing it
// (blame.go), with backoff when it died on its own. Nothing a plugin does
// ends nekro.
//
// A sandbox path never reaches a plugin as a path into the chat's real
// /app/shared, which the sandbox can change under it: _ctx.fs resolves it
// without following symlinks and hands the plugin a private copy, written
// back when the call ends (nekro_agent/tools/file_system.py).
package pyplugin

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nekro-go/nekro/plugin"
)

//go:embed all:python
var pythonFS embed.FS

// Options say where the plugins are and how to run them.
type Options struct {
	// Dirs are searched for plugins, in order (--plugin-dir).
	Dirs []string
	// InstalledDir is searched after Dirs, and need not exist: where
	// `nekro plugins install` puts plugins when no --plugin-dir is given
	// (data/plugins-py).
	InstalledDir string
	// Python is the interpreter; default /usr/bin/python3.
	Python string
	// CacheDir receives the nekro_agent package the processes import
	// (a directory per package version); usually data/python.
	CacheDir string
	// PluginsDir is where plugins' data directories are, data/plugins:
	// a plugin may ask for its own (get_plugin_data_dir) while it is
	// imported, before nekro knows its key.
	PluginsDir string
	// Index is where the plugins' declared requirements and
	// dynamic_import_pkg's missing packages are installed from, each
	// plugin into its own environment (env.go): an http(s) URL of a
	// package index, or a directory of wheels (--python-index). Empty:
	// only what the system has; a missing package is an error naming the
	// flag.
	Index string
	// InstallTimeout bounds the installation of one plugin's declared
	// requirements; default DefaultInstallTimeout.
	InstallTimeout time.Duration
	// Memory says the long-term memory is on (--memory): what the
	// reference's is_memory_system_enabled answers plugins.
	Memory bool
	// StartTimeout bounds a process's import of its plugin; default 30 s.
	StartTimeout time.Duration
	Log          *slog.Logger
}

// Set is the loaded Python plugins and their processes.
type Set struct {
	// Plugins are those that loaded, sorted by key, as Load found them
	// (Attach's watcher may add, reload and remove plugins since).
	Plugins []*plugin.Plugin
	// Failed says, per plugin file, why it did not load, as at Load
	// (Failures is the current list).
	Failed map[string]error
	// Paths gives each plugin's file, by key (for clash messages).
	Paths map[string]string

	opts   Options
	pkgDir string
	// history answers the hosts' DBChatMessage queries (UseHistory).
	history historySource
	// queries answers the hosts' chat platform queries (UseQueries).
	queries querySource
	// stores answers the hosts' knowledge and memory reads (UseKnowledge,
	// UseMemories).
	stores storeSource

	mu       sync.Mutex
	hosts    map[string]*host // by path: the current version of each plugin
	failed   map[string]error // by path
	retiring map[*host]bool   // replaced or removed, finishing their calls
	// loads serialises loads, reloads and removals (live.go).
	loads sync.Mutex
	// watch is the watcher's state (live.go); stop ends it.
	seen, pending map[string]string
	stop          context.CancelFunc
	watching      sync.WaitGroup
}

// Load starts a process for every plugin found in opts.Dirs and returns
// those that described themselves correctly. A directory that does not
// exist is an error; a plugin that fails is reported in Set.Failed and
// left out, the others load.
func Load(ctx context.Context, opts Options) (*Set, error) {
	if opts.Python == "" {
		opts.Python = "/usr/bin/python3"
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Index != "" && !strings.HasPrefix(opts.Index, "http://") && !strings.HasPrefix(opts.Index, "https://") {
		abs, err := filepath.Abs(opts.Index)
		if err != nil {
			return nil, fmt.Errorf("--python-index: %w", err)
		}
		opts.Index = abs
	}
	// The processes run in their plugins' directories: every path they
	// get is absolute.
	cacheDir, err := filepath.Abs(opts.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("python plugins: %w", err)
	}
	opts.CacheDir = cacheDir
	if opts.PluginsDir != "" {
		if opts.PluginsDir, err = filepath.Abs(opts.PluginsDir); err != nil {
			return nil, fmt.Errorf("python plugins: %w", err)
		}
	}
	set := &Set{Failed: map[string]error{}, Paths: map[string]string{}, opts: opts,
		hosts: map[string]*host{}, failed: map[string]error{}, retiring: map[*host]bool{},
		seen: map[string]string{}, pending: map[string]string{}}
	paths, err := find(opts.Dirs)
	if err != nil {
		return set, err
	}
	if extra := set.extraDir(); extra != "" {
		paths = append(paths, findExisting([]string{extra})...)
	}
	if len(paths) == 0 {
		return set, nil
	}
	for _, path := range paths {
		set.seen[path] = signature(path) // before loading: an edit during the load is seen
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, path := range paths {
		wg.Go(func() {
			h, p, err := set.start(ctx, path)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				set.Failed[path] = err
				opts.Log.Error("python plugin not loaded", "file", path, "err", err)
				return
			}
			if other, dup := set.Paths[p.Key()]; dup {
				h.close()
				set.Failed[path] = fmt.Errorf("plugin key %s is also defined by %s", p.Key(), other)
				return
			}
			set.Paths[p.Key()] = path
			set.Plugins = append(set.Plugins, p)
			set.hosts[path] = h
		})
	}
	wg.Wait()
	for path, err := range set.Failed {
		set.failed[path] = err
	}
	sort.Slice(set.Plugins, func(i, j int) bool { return set.Plugins[i].Key() < set.Plugins[j].Key() })
	return set, nil
}

// Keys returns the keys of the plugins that loaded, sorted: the plugins
// the operator installed (registry.Installed).
func (s *Set) Keys() []string {
	if s == nil {
		return nil
	}
	out := make([]string, len(s.Plugins))
	for i, p := range s.Plugins {
		out[i] = p.Key()
	}
	return out
}

// extraDir is opts.InstalledDir unless Dirs has it already.
func (s *Set) extraDir() string {
	d := s.opts.InstalledDir
	if d == "" {
		return ""
	}
	abs, _ := filepath.Abs(d)
	for _, o := range s.opts.Dirs {
		if oa, _ := filepath.Abs(o); oa == abs {
			return ""
		}
	}
	return d
}

// dirs are the directories searched for plugins.
func (s *Set) dirs() []string {
	if extra := s.extraDir(); extra != "" {
		return append(append([]string(nil), s.opts.Dirs...), extra)
	}
	return s.opts.Dirs
}

// start runs the plugin at path in a process of its own, its
// requirements installed first, and builds the plugin it describes.
func (s *Set) start(ctx context.Context, path string) (*host, *plugin.Plugin, error) {
	s.mu.Lock()
	if s.pkgDir == "" {
		dir, err := unpack(s.opts.CacheDir)
		if err != nil {
			s.mu.Unlock()
			return nil, nil, err
		}
		s.pkgDir = dir
	}
	pkgDir := s.pkgDir
	s.mu.Unlock()
	opts := s.opts
	h := &host{path: path, python: opts.Python, pkgDir: pkgDir, startTimeout: opts.StartTimeout,
		index: opts.Index, envDir: EnvDir(opts.CacheDir, path), installTimeout: opts.InstallTimeout,
		pluginsDir: opts.PluginsDir, history: &s.history, queries: &s.queries,
		stores: &s.stores, memoryOn: opts.Memory, log: opts.Log.With("python_plugin", filepath.Base(path))}
	p, err := h.load(ctx)
	if err != nil {
		return nil, nil, err
	}
	return h, p, nil
}

// Probe loads the plugin at path as Load would (its requirements
// installed into its environment), returns the plugin it describes and
// stops its process: what `nekro plugins install` checks before it
// reports a plugin installed.
func Probe(ctx context.Context, opts Options, path string) (*plugin.Plugin, error) {
	set, err := Load(ctx, Options{Python: opts.Python, CacheDir: opts.CacheDir, PluginsDir: opts.PluginsDir,
		Index: opts.Index, InstallTimeout: opts.InstallTimeout, StartTimeout: opts.StartTimeout, Log: opts.Log})
	if err != nil {
		return nil, err
	}
	defer set.Close()
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	h, p, err := set.start(ctx, abs)
	if err != nil {
		return nil, err
	}
	h.close()
	return p, nil
}

// Failures says, per plugin file, why it is not loaded now.
func (s *Set) Failures() map[string]error {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]error, len(s.failed))
	for k, v := range s.failed {
		out[k] = v
	}
	return out
}

// PathOf returns the file or package directory of the loaded plugin with
// key.
func (s *Set) PathOf(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for path, h := range s.hosts {
		if h.plugin.Key() == key {
			return path, true
		}
	}
	return "", false
}

// Close stops the watcher (Attach) and every process. The plugins'
// cleanup hooks must have run (the plugin host runs them when it
// closes).
func (s *Set) Close() error {
	s.StopWatching()
	s.mu.Lock()
	var all []*host
	for _, h := range s.hosts {
		all = append(all, h)
	}
	for h := range s.retiring {
		all = append(all, h)
	}
	s.mu.Unlock()
	for _, h := range all {
		h.close()
	}
	return nil
}

// StopWatching ends Attach's watch of the plugin directories (and waits
// for a load under way); the plugins stay loaded.
func (s *Set) StopWatching() {
	s.mu.Lock()
	stop := s.stop
	s.mu.Unlock()
	if stop != nil {
		stop()
		s.watching.Wait()
	}
}

// Memory returns each plugin process's resident memory in bytes, by key.
func (s *Set) Memory() map[string]int64 {
	out := map[string]int64{}
	s.mu.Lock()
	hosts := make([]*host, 0, len(s.hosts))
	for _, h := range s.hosts {
		hosts = append(hosts, h)
	}
	s.mu.Unlock()
	for _, h := range hosts {
		h.mu.Lock()
		p := h.proc
		h.mu.Unlock()
		if p == nil || p.cmd == nil || p.cmd.Process == nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				var kb int64
				fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
				out[h.plugin.Key()] = kb << 10
			}
		}
	}
	return out
}

// find lists the plugins in dirs: *.py files and directories holding
// __init__.py, skipping names that start with "_" or ".".
func find(dirs []string) ([]string, error) {
	var out []string
	for _, dir := range dirs {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("--plugin-dir %s: %w", dir, err)
		}
		for _, e := range ents {
			name := e.Name()
			if strings.HasPrefix(name, "_") || strings.HasPrefix(name, ".") {
				continue
			}
			path, err := filepath.Abs(filepath.Join(dir, name))
			if err != nil {
				return nil, err
			}
			switch {
			case e.Type().IsRegular() && strings.HasSuffix(name, ".py"):
				out = append(out, path)
			case e.IsDir():
				if _, err := os.Stat(filepath.Join(path, "__init__.py")); err == nil {
					out = append(out, path)
				}
			}
		}
	}
	return out, nil
}

// unpack writes the embedded nekro_agent package under cacheDir, in a
// directory named by its content's hash (written once, then reused), and
// returns the directory to put on PYTHONPATH.
func unpack(cacheDir string) (string, error) {
	sum := sha256.New()
	var files []string
	err := fs.WalkDir(pythonFS, "python", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := pythonFS.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(sum, "%s %d\n", p, len(b))
		sum.Write(b)
		files = append(files, p)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("nekro_agent package: %w", err)
	}
	dir := filepath.Join(cacheDir, hex.EncodeToString(sum.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(dir, "nekro_agent", "__init__.py")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("nekro_agent package: %w", err)
	}
	tmp, err := os.MkdirTemp(cacheDir, ".unpack-")
	if err != nil {
		return "", fmt.Errorf("nekro_agent package: %w", err)
	}
	defer os.RemoveAll(tmp)
	for _, p := range files {
		b, _ := pythonFS.ReadFile(p)
		dst := filepath.Join(tmp, strings.TrimPrefix(p, "python/"))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", fmt.Errorf("nekro_agent package: %w", err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return "", fmt.Errorf("nekro_agent package: %w", err)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("nekro_agent package: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, fs.ErrExist) {
		if _, serr := os.Stat(dir); serr != nil { // another process won the race: fine
			return "", fmt.Errorf("nekro_agent package: %w", err)
		}
	}
	return dir, nil
}
