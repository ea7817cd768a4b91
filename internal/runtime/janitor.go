package runtime

import (
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nekro-go/nekro/internal/sandbox"
)

// janitor empties the shared directories of sandboxes idle for
// Config.SharedIdle, as the reference does (files in /app/shared are not
// meant to last; plugins keep what must last in their data directory or
// the KV store). A sandbox with a run going is never touched.
type janitor struct {
	rt   *Runtime
	idle time.Duration
	stop chan struct{}
	done chan struct{}

	mu sync.Mutex
	// All by the shared directory's name (Layout.SharedDir's base name).
	active map[string]int       // runs going
	last   map[string]time.Time // end of its last run
	chat   map[string]string    // chat key (to drop spares)
}

func newJanitor(rt *Runtime, idle time.Duration) *janitor {
	j := &janitor{rt: rt, idle: idle, stop: make(chan struct{}), done: make(chan struct{}),
		active: map[string]int{}, last: map[string]time.Time{}, chat: map[string]string{}}
	go j.loop()
	return j
}

// begin and end bracket a run in the sandbox whose shared directory is
// named dir.
func (j *janitor) begin(dir, chatKey string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.active[dir]++
	j.chat[dir] = chatKey
}

func (j *janitor) end(dir string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.active[dir]--
	if j.active[dir] <= 0 {
		delete(j.active, dir)
	}
	j.last[dir] = time.Now()
}

func (j *janitor) loop() {
	defer close(j.done)
	tick := time.NewTicker(min(j.idle/4, time.Minute))
	defer tick.Stop()
	for {
		select {
		case <-j.stop:
			return
		case <-tick.C:
			j.sweep(time.Now())
		}
	}
}

// sweep empties every shared directory idle longer than j.idle. Sandboxes
// this process has not run since it started count from their directory's
// modification time.
func (j *janitor) sweep(now time.Time) {
	root := filepath.Join(j.rt.layout.Root, "sandboxes")
	ents, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.IsDir() {
			j.sweepOne(now, root, e)
		}
	}
}

// sweepOne holds the lock from the idle check to the removal, so a run
// starting meanwhile (begin) waits and never sees its files vanish.
func (j *janitor) sweepOne(now time.Time, root string, e os.DirEntry) {
	key := e.Name()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.active[key] > 0 {
		return
	}
	last, seen := j.last[key]
	if !seen {
		info, err := e.Info()
		if err != nil {
			return
		}
		last = info.ModTime()
	}
	if now.Sub(last) < j.idle {
		return
	}
	dir := filepath.Join(root, key)
	files := removable(dir)
	if len(files) == 0 {
		return // nothing but the chat's packages: emptied already
	}
	if chatKey := j.chat[key]; chatKey != "" {
		j.rt.DiscardSpares(chatKey)
	}
	empty(dir, files)
	j.last[key] = now
	j.rt.log.Info("emptied an idle sandbox's shared directory", "dir", key, "chat", j.chat[key], "idle", now.Sub(last).Round(time.Second))
}

// removable lists what an emptying removes from dir: everything but the
// chat's installed packages (its quota bounds them).
func removable(dir string) []os.DirEntry {
	files, _ := os.ReadDir(dir)
	kept := files[:0]
	for _, f := range files {
		if f.Name() != sandbox.PackagesDirName {
			kept = append(kept, f)
		}
	}
	return kept
}

// empty removes files, which removable listed, from dir.
func empty(dir string, files []os.DirEntry) {
	for _, f := range files {
		os.RemoveAll(filepath.Join(dir, f.Name()))
	}
}

// remounted empties the shared directory dir, whose volume was just
// mounted again after it had been unmounted idle (provisioner), when its
// last run ended more than j.idle ago: unmounted, it showed the sweep
// nothing to empty. No sandbox has it mounted yet.
func (j *janitor) remounted(dir string) {
	key := filepath.Base(dir)
	j.mu.Lock()
	defer j.mu.Unlock()
	last, seen := j.last[key]
	if !seen || time.Since(last) < j.idle {
		return
	}
	empty(dir, removable(dir))
	j.last[key] = time.Now()
	j.rt.log.Info("emptied an idle sandbox's shared directory", "dir", key, "chat", j.chat[key], "idle", time.Since(last).Round(time.Second))
}

func (j *janitor) close() {
	close(j.stop)
	<-j.done
}
