package bwrap

// When a chat gets a zygote, and what it preloads.
//
// Measured on the 2-core VM of issue 26 (a cpuacct cgroup around the
// runner, `pass` as the code, per-run cgroups on):
//
//   - a fresh sandbox (bwrap, Python, boot.py, the run's cgroup) costs
//     35-44 ms of CPU;
//   - a run on a zygote's spare (the fork, the spare's namespaces and
//     mounts, the run, its teardown) 13-17 ms;
//   - a zygote that preloads nothing but the stubs costs about 70 ms to
//     start (bwrap, Python, zygote.py), two fresh sandboxes' worth; one
//     that imports numpy and matplotlib.pyplot about 670 ms.
//
// A zygote saves ~22 ms on each run it serves, so one without heavy
// preloads repays its start after three runs: a chat gets one once it has
// run zygoteAfterRuns times, each within ZygoteIdle of the one before.
// With numpy or matplotlib, a fresh run pays their imports itself (0.4-0.6
// s), so the zygote that preloads them repays itself at the second run
// that uses them: a chat whose code named them gets one after
// zygoteAfterHeavyRuns runs. Each zygote imports only what its chat's
// code named (a chat that never used numpy does not pay for it); when the
// chat's code names one more, its zygote is started again with it.
//
// Zygotes never evict each other while they are in use: at the
// Zygotes or ZygoteMemory bound, a new zygote replaces only one that is
// ready, has served a run, and has not served one for zygoteEvictIdle. A
// zygote still importing, or not yet used, is never stopped to make room
// (that was issue 26's LRU thrash: with more active chats than Zygotes,
// zygotes were stopped half-imported and started again). The chats that
// find no room use fresh sandboxes and warm spares.

import (
	"bytes"
	"sync"
	"time"
)

const (
	// zygoteAfterRuns is how many runs, each within ZygoteIdle of the one
	// before, earn a chat a zygote that preloads nothing heavy.
	zygoteAfterRuns = 3
	// zygoteAfterHeavyRuns is the same for a chat whose code named a
	// heavy preload (numpy, matplotlib).
	zygoteAfterHeavyRuns = 2
	// zygoteEvictIdle is how long a zygote must have served no run before
	// another chat's may replace it.
	zygoteEvictIdle = 10 * time.Second
	// chatSweepEvery bounds how often the chat records are swept.
	chatSweepEvery = 5 * time.Second
)

// chatRecord is what the runner remembers of a chat's recent runs. It is
// dropped ZygoteIdle after the chat's last run.
type chatRecord struct {
	runs int       // runs, each within ZygoteIdle of the one before
	last time.Time // the last run's release
	uses uint64    // bit i: the code named preload module i (Runner.preloads)
}

// chats holds the chat records (by shared directory) under its own lock:
// runs are noted on their release, outside the zygotes' lock.
type chats struct {
	mu    sync.Mutex
	by    map[string]*chatRecord
	swept time.Time
}

// noteRun records a run of code in the chat of sharedDir: one more run,
// and the heavy modules its code names.
func (r *Runner) noteRun(sharedDir string, code []byte) {
	if r.Zygotes <= 0 {
		return
	}
	uses := usedPreloads(r.preloads(), code)
	idle := r.zygoteIdle()
	now := time.Now()
	c := &r.zchats
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[string]*chatRecord{}
	}
	if now.Sub(c.swept) > chatSweepEvery {
		c.swept = now
		for k, rec := range c.by {
			if now.Sub(rec.last) > idle {
				delete(c.by, k)
			}
		}
	}
	rec := c.by[sharedDir]
	if rec == nil || now.Sub(rec.last) > idle {
		rec = &chatRecord{}
		c.by[sharedDir] = rec
	}
	rec.runs++
	rec.last = now
	rec.uses |= uses
}

// chatWants reports whether the chat of sharedDir has earned a zygote,
// and which preloads it should import.
func (r *Runner) chatWants(sharedDir string) (earned bool, preload []string) {
	c := &r.zchats
	c.mu.Lock()
	rec := c.by[sharedDir]
	var runs int
	var uses uint64
	if rec != nil && time.Since(rec.last) <= r.zygoteIdle() {
		runs, uses = rec.runs, rec.uses
	}
	c.mu.Unlock()
	all := r.preloads()
	for i, m := range all {
		if i < 64 && uses&(1<<i) != 0 {
			preload = append(preload, m)
		}
	}
	need := zygoteAfterRuns
	if uses != 0 {
		need = zygoteAfterHeavyRuns
	}
	return runs >= need, preload
}

// preloads is the list of modules a zygote may import for its chat.
func (r *Runner) preloads() []string {
	if r.Preload == nil {
		return DefaultPreload
	}
	return r.Preload
}

// importedWith names, for a preloaded package, the packages whose import
// imports it too: code naming those gains from it as well.
var importedWith = map[string][]string{
	"numpy":      {"pandas", "scipy", "sklearn", "seaborn", "matplotlib"},
	"matplotlib": {"seaborn"},
}

// usedPreloads returns the preload modules code names (bit i for
// preload[i]): its top-level package, or one that imports it, appears in
// the code as a word. A mention is enough (an import, __import__, a
// string passed to importlib): a wrong guess costs one zygote's imports,
// a missed one the run's own.
func usedPreloads(preload []string, code []byte) uint64 {
	var uses uint64
	for i, m := range preload {
		if i >= 64 {
			break
		}
		root := m
		for j := 0; j < len(m); j++ {
			if m[j] == '.' {
				root = m[:j]
				break
			}
		}
		for _, name := range append([]string{root}, importedWith[root]...) {
			if namesWord(code, name) {
				uses |= 1 << i
				break
			}
		}
	}
	return uses
}

// namesWord reports whether word appears in code with no identifier
// character either side.
func namesWord(code []byte, word string) bool {
	for from := 0; from+len(word) <= len(code); {
		i := indexFrom(code, word, from)
		if i < 0 {
			return false
		}
		end := i + len(word)
		if (i == 0 || !identByte(code[i-1])) && (end == len(code) || !identByte(code[end])) {
			return true
		}
		from = i + 1
	}
	return false
}

func indexFrom(code []byte, word string, from int) int {
	i := bytes.Index(code[from:], []byte(word))
	if i < 0 {
		return -1
	}
	return from + i
}

func identByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= 0x80
}

// makeRoomLocked stops zygotes until one more fits the Zygotes and
// ZygoteMemory bounds, choosing only zygotes that are ready, have served,
// and have been unused for zygoteEvictIdle (least recently used first);
// false when there is no such zygote to stop. r.zmu is held.
func (r *Runner) makeRoomLocked() bool {
	ceiling := r.ZygoteMemory
	if ceiling <= 0 {
		ceiling = defaultZygoteMemory
	}
	for {
		var total int64
		for _, z := range r.zygotes {
			total += z.pss()
		}
		if len(r.zygotes) < r.Zygotes && total+zygoteEstimate <= ceiling {
			return true
		}
		var lru *zygote
		var lruUsed time.Time
		for _, z := range r.zygotes {
			used, evictable := z.evictable()
			if evictable && (lru == nil || used.Before(lruUsed)) {
				lru, lruUsed = z, used
			}
		}
		if lru == nil {
			return false
		}
		delete(r.zygotes, lru.chat)
		go lru.retire()
	}
}
