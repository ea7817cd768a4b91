package pyplugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	nekrohost "github.com/nekro-go/nekro/internal/host"
	"github.com/nekro-go/nekro/plugin"
)

// Plugins that change while nekro serves.
//
// Attach makes a Set follow its plugin directories: every WatchEvery it
// looks at the plugins' files (names, sizes, modification times), and a
// plugin whose files changed, and then stayed the same for one more look
// (a copy or an editor's save is over), is loaded again; a new plugin is
// loaded and added; a plugin whose files are gone is removed. POST
// /api/plugins/{key}/reload does the same for one plugin at once
// (host.ReloadPlugin, Reload here).
//
// A reload starts the new version in a process of its own, with its
// requirements installed, and runs its init; only then do new calls go to
// it (host.SwapPlugin). Calls in flight finish on the old process, which
// then runs its cleanup and stops. A new version that fails to load or
// to init leaves the old one serving; the failure is listed (Failures)
// until a later change loads.

// WatchEvery is how often an attached Set looks at its plugins' files.
const WatchEvery = time.Second

// drainTimeout bounds how long a replaced or removed plugin's calls in
// flight may take to finish before its process is stopped.
const drainTimeout = 10 * time.Minute

// Target is what a Set changes when plugins change: *host.Host.
type Target interface {
	AddPlugin(ctx context.Context, p *plugin.Plugin) error
	SwapPlugin(ctx context.Context, p *plugin.Plugin) (*plugin.Plugin, error)
	RemovePlugin(ctx context.Context, key string) (*plugin.Plugin, bool, error)
}

var _ Target = (*nekrohost.Host)(nil)

// Attach makes h follow the Set's plugins while it runs: the loaded
// plugins may be reloaded and removed (they are dynamic in h's
// registry), h.ReloadPlugin reloads one, and the plugin directories are
// watched until Close.
func (s *Set) Attach(h *nekrohost.Host) {
	keys := make([]string, 0, len(s.Plugins))
	s.mu.Lock()
	for _, hh := range s.hosts {
		keys = append(keys, hh.plugin.Key())
	}
	s.mu.Unlock()
	h.Registry().Dynamic(keys...)
	h.SetReloader(reloader{s, h})
	ctx, stop := context.WithCancel(context.Background())
	s.mu.Lock()
	s.stop = stop
	s.mu.Unlock()
	s.watching.Add(1)
	go func() {
		defer s.watching.Done()
		t := time.NewTicker(WatchEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			s.scan(ctx, h)
		}
	}()
}

// reloader is the Set as a host.Reloader.
type reloader struct {
	s *Set
	t Target
}

func (r reloader) Reload(ctx context.Context, key string) error { return r.s.Reload(ctx, r.t, key) }

func (r reloader) Reloadable(key string) bool {
	_, ok := r.s.PathOf(key)
	return ok
}

// Reload loads the plugin with key again from its files and swaps it in
// t; calls in flight finish on the old version.
func (s *Set) Reload(ctx context.Context, t Target, key string) error {
	path, ok := s.PathOf(key)
	if !ok {
		return fmt.Errorf("plugin %s: %w", key, nekrohost.ErrNotReloadable)
	}
	s.loads.Lock()
	defer s.loads.Unlock()
	sig := signature(path)
	err := s.reload(ctx, t, path)
	s.mu.Lock()
	s.seen[path], s.pending[path] = sig, sig
	s.mu.Unlock()
	return err
}

// scan compares the plugin directories with what is loaded and brings
// the host up to date.
func (s *Set) scan(ctx context.Context, t Target) {
	paths := findExisting(s.dirs())
	now := map[string]string{}
	for _, p := range paths {
		now[p] = signature(p)
	}
	s.loads.Lock()
	defer s.loads.Unlock()
	var todo []string
	s.mu.Lock()
	for p, sig := range now {
		if s.seen[p] == sig {
			delete(s.pending, p)
			continue
		}
		if s.pending[p] == sig { // changed, then stable for one look
			todo = append(todo, p)
		}
		s.pending[p] = sig
	}
	var gone []string
	for p := range s.seen {
		if _, ok := now[p]; !ok {
			gone = append(gone, p)
		}
	}
	s.mu.Unlock()
	sort.Strings(todo)
	for _, p := range gone {
		s.remove(ctx, t, p)
		s.mu.Lock()
		delete(s.seen, p)
		delete(s.pending, p)
		delete(s.failed, p)
		s.mu.Unlock()
	}
	for _, p := range todo {
		if ctx.Err() != nil {
			return
		}
		s.opts.Log.Info("python plugin's files changed: loading it again", "file", p)
		s.reload(ctx, t, p)
		s.mu.Lock()
		s.seen[p] = now[p]
		delete(s.pending, p)
		s.mu.Unlock()
	}
}

// reload loads the plugin at path (again, or for the first time) and
// puts it in t; s.loads is held.
func (s *Set) reload(ctx context.Context, t Target, path string) error {
	s.mu.Lock()
	old := s.hosts[path]
	s.mu.Unlock()
	nh, p, err := s.start(ctx, path)
	if err == nil {
		err = s.install(ctx, t, path, old, nh, p)
		if err != nil {
			nh.close()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failed[path] = err
		s.opts.Log.Error("python plugin not (re)loaded", "file", path, "err", err, "old_version_serving", old != nil)
		return err
	}
	delete(s.failed, path)
	s.hosts[path] = nh
	return nil
}

// install puts the new host nh's plugin p in t: in the place of old's
// (the same key), or as a new plugin (old nil, or its key changed, when
// old's plugin leaves).
func (s *Set) install(ctx context.Context, t Target, path string, old, nh *host, p *plugin.Plugin) error {
	s.mu.Lock()
	for other, h := range s.hosts {
		if other != path && h.plugin.Key() == p.Key() {
			s.mu.Unlock()
			return fmt.Errorf("plugin key %s is also defined by %s", p.Key(), other)
		}
	}
	s.mu.Unlock()
	if old != nil && old.plugin.Key() == p.Key() {
		if _, err := t.SwapPlugin(ctx, p); err != nil {
			return err
		}
		s.retire(old, nh)
		return nil
	}
	if err := t.AddPlugin(ctx, p); err != nil {
		return err
	}
	if old != nil {
		if _, _, err := t.RemovePlugin(ctx, old.plugin.Key()); err != nil {
			s.opts.Log.Warn("python plugin's old key not removed", "plugin", old.plugin.Key(), "err", err)
		}
		s.retire(old, nil)
	}
	return nil
}

// remove takes the plugin at path out of t: its files are gone.
func (s *Set) remove(ctx context.Context, t Target, path string) {
	s.mu.Lock()
	old := s.hosts[path]
	delete(s.hosts, path)
	s.mu.Unlock()
	if old == nil {
		return
	}
	s.opts.Log.Info("python plugin's files are gone: removing it", "file", path, "plugin", old.plugin.Key())
	if _, _, err := t.RemovePlugin(ctx, old.plugin.Key()); err != nil {
		s.opts.Log.Warn("python plugin not removed", "plugin", old.plugin.Key(), "err", err)
	}
	s.retire(old, nil)
}

// retire sends h's new calls to next (nil: they fail, the plugin was
// removed), lets those in flight finish, runs its cleanup hook and stops
// its process, in the background.
func (s *Set) retire(h *host, next *host) {
	h.mu.Lock()
	if !h.retired && h.retiredCh != nil {
		close(h.retiredCh)
	}
	h.retired, h.next = true, next
	h.mu.Unlock()
	s.mu.Lock()
	s.retiring[h] = true
	s.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		defer cancel()
		if err := h.drain(ctx); err != nil {
			h.log.Warn("python plugin's old version still had calls in flight: stopping it", "err", err)
		}
		h.mu.Lock()
		cleanup := h.hooks.Cleanup && h.inited
		h.mu.Unlock()
		if cleanup {
			cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
			if _, err := h.requestAs(cctx, message{Op: "cleanup"}, "", ""); err != nil {
				h.log.Warn("python plugin's old version: cleanup failed", "err", err)
			}
			ccancel()
		}
		h.close()
		s.mu.Lock()
		delete(s.retiring, h)
		s.mu.Unlock()
	}()
}

// drain waits until h has no call or hook request under way.
func (h *host) drain(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		h.mu.Lock()
		n := h.active
		h.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d call(s) in flight: %w", n, ctx.Err())
		case <-t.C:
		}
	}
}

// findExisting is find over the directories that exist (a plugin
// directory may be made after nekro started).
func findExisting(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		paths, err := find([]string{d})
		if err == nil {
			out = append(out, paths...)
		}
	}
	return out
}

// signature names the state of a plugin's files: each file's name, size
// and modification time (bytecode caches and hidden files left out), and
// its requirement files'.
func signature(path string) string {
	sum := sha256.New()
	add := func(p string, fi fs.FileInfo) {
		fmt.Fprintf(sum, "%s %d %d %v\n", p, fi.Size(), fi.ModTime().UnixNano(), fi.Mode())
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return ""
	}
	if !fi.IsDir() {
		add(path, fi)
		for _, r := range requirementFiles(path) {
			if rfi, err := os.Lstat(r); err == nil {
				add(r, rfi)
			}
		}
		return hex.EncodeToString(sum.Sum(nil))
	}
	filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		name := d.Name()
		if p != path && (strings.HasPrefix(name, ".") || name == "__pycache__") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if fi, err := d.Info(); err == nil {
			add(p, fi)
		}
		return nil
	})
	return hex.EncodeToString(sum.Sum(nil))
}
