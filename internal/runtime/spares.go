package runtime

// The warm-spare pool: a started sandbox per recently active chat, so the
// chat's next run skips sandbox start-up (Config.WarmSpares).

import (
	"context"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"time"

	"github.com/nekro-go/nekro/internal/keys"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/sandbox"
)

// spareStartTimeout bounds how long a warm spare may take to become ready
// (far above the ~20 ms it takes; a host that slow gets no spare).
const spareStartTimeout = 30 * time.Second

// spawnSpare starts a sandbox for chatKey's next run, when the pool has
// room; it waits for a start slot as work that begins now.
func (rt *Runtime) spawnSpare(chatKey string, limits sandbox.Limits, methods []*pluginhost.MethodInfo) {
	key := spareKey(chatKey, limits, methods)
	if !rt.spares.reserve(key, false) {
		return
	}
	rt.startReserved(key, chatKey, limits, methods, time.Time{})
}

// startReserved starts the spare reserve held a place for.
func (rt *Runtime) startReserved(key, chatKey string, limits sandbox.Limits, methods []*pluginhost.MethodInfo, since time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), spareStartTimeout)
	defer cancel()
	// A few at a time, the oldest work first: the starts are work for
	// the CPU (a new chat's volumes, the sandbox's fork and isolation),
	// and 64 turns' starting all at once shared the cores and finished
	// all late, where in order the first are ready first.
	if err := rt.startSlots.acquire(ctx, since); err != nil {
		rt.spares.unreserve(key)
		rt.log.Warn("cannot start a warm sandbox", "chat", chatKey, "err", err)
		return
	}
	defer rt.startSlots.release()
	pr, err := rt.prepare(ctx, chatKey, limits, methods, true)
	if err == nil {
		if p, ok := pr.proc.(sandbox.Preparer); ok {
			if err = p.Prepare(ctx); err != nil {
				pr.discard()
			}
		}
	}
	if err != nil {
		rt.spares.unreserve(key)
		rt.log.Warn("cannot start a warm sandbox", "chat", chatKey, "err", err)
		return
	}
	rt.spares.put(key, pr)
}

// concurrentStarts is how many warm sandboxes start at once: two per core,
// so that one waiting on the disk leaves its core to another.
func concurrentStarts() int { return 2 * goruntime.NumCPU() }

// Prewarm starts a sandbox for chatKey's next run, with the limits and
// methods that run will have, unless one is already waiting or starting.
// A caller that knows a run may come soon calls it: the agent, when it
// asks the model for a reply that may be code, so the sandbox starts
// while the model writes. The run then takes it, waiting for it if it is
// still starting, instead of starting one of its own; a run whose caller
// prewarmed it (ExecRequest.Prewarmed) starts no spare after it, so no
// sandbox is started for a run that never comes.
//
// since is when the work the run serves began, as in ExecRequest.Since:
// starts waiting for a slot are served oldest first.
func (rt *Runtime) Prewarm(chatKey string, limits sandbox.Limits, methods []*pluginhost.MethodInfo, since time.Time) {
	if rt.spares == nil || keys.Scope("chat", chatKey) != nil {
		return
	}
	limits = rt.limits(limits)
	// Reserved now, not in the goroutine: a run that comes at once (a
	// fast model) must find its sandbox starting, or it starts one of
	// its own inside a run slot while this one starts for nothing.
	key := spareKey(chatKey, limits, methods)
	if !rt.spares.reserve(key, true) {
		return
	}
	rt.bg.Go(func() { rt.startReserved(key, chatKey, limits, methods, since) })
}

// DiscardSpares ends the warm sandboxes of chatKey, e.g. when the chat is
// reset and its shared directory is about to be removed.
func (rt *Runtime) DiscardSpares(chatKey string) {
	if rt.spares != nil {
		rt.spares.dropChat(chatKey)
	}
}

// DropSpares ends every warm sandbox, also those still starting: the
// host calls it when the enabled plugins changed, since their stubs list
// the methods of the plugins as they were.
func (rt *Runtime) DropSpares() {
	if rt.spares != nil {
		rt.spares.dropAll()
	}
}

// spareKey is what a warm spare must match to serve a run: the chat, the
// limits the sandbox was started with (the time limit is the host's and
// may differ) and the methods its stubs offer, each by identity: a method
// a dynamic plugin replaced (host.ReplacePlugin) under the same name,
// with another signature, is another method. (A spare holds its methods,
// so their addresses are not reused while it waits.)
func spareKey(chatKey string, l sandbox.Limits, methods []*pluginhost.MethodInfo) string {
	l.Timeout = 0
	var b strings.Builder
	for _, m := range methods {
		fmt.Fprintf(&b, "%s.%s@%p,", m.Plugin().Key(), m.Name, m)
	}
	return fmt.Sprintf("%s\x00%+v\x00%s", chatKey, l, b.String())
}

// spares keeps at most one started sandbox per recently active chat, so
// the next run in that chat skips sandbox start-up. A spare started after
// a run, for a next one that may come, is started only when the pool has
// room (such spares never evict each other: with more active chats than
// room, evicting would start sandboxes that are thrown away unused and
// slow every run down). A prewarm, for a run that is coming, evicts the
// longest idle of those when the pool is full, and starts even when none
// can go (the runs coming are bounded by their callers). A spare is
// discarded when idle too long, when its chat is reset, and on Close.
type spares struct {
	mu       sync.Mutex
	byKey    map[string]*spare
	starting map[string]*starting  // reserved, not yet put
	recent   map[string]recentRuns // by chat: its runs in a row (ran)
	max      int
	idle     time.Duration
	closed   bool
}

// activeAfter is how many runs in a row, each within the idle time of
// the one before, make a chat active: a run of an active chat starts a
// spare after it even when its caller prewarmed it. Prewarming starts the
// next run's sandbox while the model writes; a model faster than a
// sandbox's start leaves the run waiting for it (an instant scripted
// model: 35 ms a turn instead of 18), while a spare after the run is
// ready in time. A chat that ran this often is likely to run again soon,
// so the spare is worth its start; a chat of one or two messages still
// starts no sandbox for a run that never comes.
const activeAfter = 3

// maxRecent bounds the chats ran remembers before it forgets the idle ones.
const maxRecent = 4096

// recentRuns counts a chat's runs in a row.
type recentRuns struct {
	n    int
	last time.Time
}

// ran records a run of chatKey at now and reports whether the chat is
// active (activeAfter).
func (s *spares) ran(chatKey string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.recent[chatKey]
	if now.Sub(r.last) > s.idle {
		r.n = 0
	}
	r.n++
	r.last = now
	s.recent[chatKey] = r
	if len(s.recent) > maxRecent {
		for k, v := range s.recent {
			if now.Sub(v.last) > s.idle {
				delete(s.recent, k)
			}
		}
	}
	return r.n >= activeAfter
}

// starting is a spare being started: live until dropChat or dropAll
// cancels it; done is closed when it is put or given up.
type starting struct {
	live    bool
	done    chan struct{}
	waiters int // runs that wait for it (take)
}

// reserve reports whether a spare for key may be started now, and if so
// holds a place for it until put. A prewarm (a run is coming: its turn
// is asking the model) makes room by discarding the longest idle spare
// no run waits for, and is not refused for want of room: refused, the
// run would start its sandbox itself, in a run slot, later.
func (s *spares) reserve(key string, prewarm bool) bool {
	s.mu.Lock()
	if _, busy := s.starting[key]; s.closed || busy {
		s.mu.Unlock()
		return false
	}
	if _, ok := s.byKey[key]; ok {
		s.mu.Unlock()
		return false // one is already waiting
	}
	var evicted *preparedRun
	if len(s.byKey)+len(s.starting) >= s.max {
		if !prewarm {
			s.mu.Unlock()
			return false
		}
		evicted = s.evictIdleLocked()
	}
	s.starting[key] = &starting{live: true, done: make(chan struct{})}
	s.mu.Unlock()
	if evicted != nil {
		evicted.discard()
	}
	return true
}

// evictIdleLocked takes the longest idle spare out of the pool, unless a
// run waits for it, and returns it to be discarded; nil when none can go.
func (s *spares) evictIdleLocked() *preparedRun {
	var oldKey string
	var old *spare
	for k, sp := range s.byKey {
		if !sp.wanted && (old == nil || sp.at.Before(old.at)) {
			oldKey, old = k, sp
		}
	}
	if old == nil {
		return nil
	}
	old.timer.Stop()
	delete(s.byKey, oldKey)
	return old.run
}

// unreserve gives back a place reserve held, when the start failed.
func (s *spares) unreserve(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.starting[key]; st != nil {
		close(st.done)
		delete(s.starting, key)
	}
}

type spare struct {
	run   *preparedRun
	timer *time.Timer
	at    time.Time // when it was put
	// wanted says a run waited for it while it started (take): it is
	// about to be taken, and no prewarm evicts it.
	wanted bool
}

// take returns the spare waiting for key, or nil. A spare still starting
// is waited for (until ctx ends): it started before this run asked, so it
// is ready sooner than a sandbox started now would be, and starting both
// would pay for two.
func (s *spares) take(ctx context.Context, key string) *preparedRun {
	s.mu.Lock()
	for {
		if sp, ok := s.byKey[key]; ok {
			delete(s.byKey, key)
			sp.timer.Stop()
			s.mu.Unlock()
			return sp.run
		}
		st := s.starting[key]
		live := st != nil && st.live
		if live {
			st.waiters++
		}
		s.mu.Unlock()
		if !live {
			return nil
		}
		select {
		case <-st.done:
		case <-ctx.Done():
			s.mu.Lock()
			st.waiters--
			s.mu.Unlock()
			return nil
		}
		s.mu.Lock()
	}
}

func (s *spares) put(key string, pr *preparedRun) {
	s.mu.Lock()
	st := s.starting[key]
	live := st != nil && st.live
	if st != nil {
		defer close(st.done) // after the spare is in byKey: waiters find it
	}
	delete(s.starting, key)
	if _, dup := s.byKey[key]; s.closed || dup || !live {
		s.mu.Unlock()
		pr.discard()
		return
	}
	sp := &spare{run: pr, at: time.Now(), wanted: st.waiters > 0}
	s.byKey[key] = sp
	sp.timer = time.AfterFunc(s.idle, func() {
		s.mu.Lock()
		mine := s.byKey[key] == sp
		if mine {
			delete(s.byKey, key)
		}
		s.mu.Unlock()
		if mine {
			pr.discard()
		}
	})
	s.mu.Unlock()
}

// dropChat discards the spares of chatKey, also those still starting.
func (s *spares) dropChat(chatKey string) {
	s.mu.Lock()
	delete(s.recent, chatKey)
	for k, st := range s.starting {
		if strings.HasPrefix(k, chatKey+"\x00") {
			st.live = false
		}
	}
	var drop []*preparedRun
	for k, sp := range s.byKey {
		if sp.run.chatKey == chatKey {
			sp.timer.Stop()
			drop = append(drop, sp.run)
			delete(s.byKey, k)
		}
	}
	s.mu.Unlock()
	for _, d := range drop {
		d.discard()
	}
}

func (s *spares) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.dropAll()
}

// dropAll discards every spare, also those still starting (their stubs
// list the methods of a set of plugins that changed).
func (s *spares) dropAll() {
	s.mu.Lock()
	for _, st := range s.starting {
		st.live = false
	}
	var drop []*preparedRun
	for k, sp := range s.byKey {
		sp.timer.Stop()
		drop = append(drop, sp.run)
		delete(s.byKey, k)
	}
	s.mu.Unlock()
	for _, d := range drop {
		d.discard()
	}
}
