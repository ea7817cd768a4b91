package pyplugin

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// A chat whose calls end a plugin's process pays for it, not the other
// chats: the process is restarted at once (no growing delay for everyone),
// and that chat's calls to the plugin are refused for a while, longer each
// time. A death with calls of several chats in flight convicts none of
// them: each one's next call runs alone in the process, so a second death
// names its chat for certain.
const (
	// freeStrikes is how many deaths a chat causes before its calls are
	// refused: a plugin bug that one input hits once or twice is forgiven.
	freeStrikes = 2
	// firstRefusal is the first refusal; each later one doubles, up to
	// maxRefusal.
	firstRefusal = 5 * time.Second
	maxRefusal   = 5 * time.Minute
	// strikeMemory is how long after its last strike a chat's count is
	// forgotten.
	strikeMemory = 10 * time.Minute
)

// webCaller stands, in the strikes and in a process's calls in flight,
// for the anonymous callers of the plugin's web routes: routes that end
// the process (or block its event loop) are refused for a while, as a
// chat's calls are, while the process restarts at once for the chats'
// sandbox calls. No chat key holds a control character, so no chat is
// ever taken for it.
const webCaller = "\x00web"

// callerLabel names a caller in the log.
func callerLabel(c string) string {
	if c == webCaller {
		return "(web routes)"
	}
	return c
}

// strike is one chat's record of ending a plugin's process.
type strike struct {
	count int
	last  time.Time
	until time.Time // its calls are refused until then
}

// verdict is what a process's death meant for the chats calling it.
type verdict struct {
	guilty   map[string]strike // chats whose calls ended it, and their record now
	suspects []string          // chats of a death no single chat can be blamed for
}

// attributed reports whether the death happened during sandbox calls
// (then it is their chats' doing, not the plugin's on its own).
func (v *verdict) attributed() bool { return v != nil && (len(v.guilty) > 0 || len(v.suspects) > 0) }

// refusal returns the error refusing chat's call, or nil when it may call.
func (h *host) refusal(chat string, now time.Time) error {
	h.mu.Lock()
	s, ok := h.strikes[chat]
	h.mu.Unlock()
	if !ok || !now.Before(s.until) {
		return nil
	}
	if chat == webCaller {
		return fmt.Errorf("plugin %s refuses web requests until %s: web requests ended the plugin's process %d times in the last %s",
			h.plugin.Key(), s.until.Format(time.RFC3339), s.count, strikeMemory)
	}
	return fmt.Errorf("plugin %s refuses calls from chat %s until %s: calls from this chat ended the plugin's process %d times in the last %s",
		h.plugin.Key(), chat, s.until.Format(time.RFC3339), s.count, strikeMemory)
}

// judge decides, when p has ended, which chats' calls ended it, records
// their strikes and logs them. It runs before p.done is closed, so calls
// that see the death can say what it cost their chat.
func (h *host) judge(p *process) {
	p.pmu.Lock()
	culprit := p.culprit
	chats := map[string]bool{}
	for _, c := range p.inflight {
		chats[c] = true
	}
	p.pmu.Unlock()
	var names []string
	for c := range chats {
		names = append(names, c)
	}
	sort.Strings(names)
	if culprit != "" { // it missed a call's deadline: that call's chat
		names = []string{culprit}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || len(names) == 0 {
		return
	}
	v := &verdict{}
	if len(names) > 1 {
		v.suspects = names
		for _, c := range names {
			h.suspects[c] = true
		}
		labels := make([]string, len(names))
		for i, c := range names {
			labels[i] = callerLabel(c)
		}
		h.log.Warn("python plugin process ended during calls from several chats: the next call of each runs alone",
			"plugin", h.plugin.Key(), "chats", labels, "err", p.exitErr)
		p.verdict = v
		return
	}
	chat, now := names[0], time.Now()
	s := h.strikes[chat]
	if now.Sub(s.last) > strikeMemory {
		s = strike{}
	}
	s.count++
	s.last = now
	if s.count > freeStrikes {
		s.until = now.Add(min(firstRefusal<<min(s.count-freeStrikes-1, 16), maxRefusal))
	}
	h.strikes[chat] = s
	delete(h.suspects, chat)
	v.guilty = map[string]strike{chat: s}
	p.verdict = v
	if s.until.After(now) {
		h.log.Warn("python plugin process ended during a call from this chat: refusing its calls", "chat", callerLabel(chat),
			"plugin", h.plugin.Key(), "times", s.count, "until", s.until.Format(time.RFC3339), "err", p.exitErr)
	} else {
		h.log.Warn("python plugin process ended during a call from this chat", "chat", callerLabel(chat),
			"plugin", h.plugin.Key(), "times", s.count, "err", p.exitErr)
	}
}

// deathError is the error of chat's call that p's death ended.
func (h *host) deathError(p *process, chat string) error {
	base := fmt.Sprintf("plugin %s: its process ended during the call (%v); it is being restarted", h.plugin.Key(), p.exitErr)
	v := p.verdict
	if v == nil || chat == "" {
		return fmt.Errorf("%s", base)
	}
	if s, ok := v.guilty[chat]; ok {
		if s.until.After(s.last) {
			return fmt.Errorf("%s; calls from chat %s ended it %d times in %s, so its calls to this plugin are refused until %s",
				base, chat, s.count, strikeMemory, s.until.Format(time.RFC3339))
		}
		return fmt.Errorf("%s; a call from chat %s ended it (%d of %d times before this chat's calls are refused for a while)",
			base, chat, s.count, freeStrikes+1)
	}
	return fmt.Errorf("%s", base)
}

// isSuspect reports whether chat's next call must run alone.
func (h *host) isSuspect(chat string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.suspects[chat]
}

// cleared records that chat's call, run alone, left the process alive.
func (h *host) cleared(chat string) {
	h.mu.Lock()
	delete(h.suspects, chat)
	h.mu.Unlock()
}

// callGate lets sandbox calls share the process, or one run alone (a
// suspect's): an exclusive call waits for those in flight, and calls that
// come after it wait for it.
type callGate struct {
	mu      sync.Mutex
	running int  // shared calls in flight
	alone   bool // an exclusive call is in flight
	waiting int  // exclusive calls waiting
	changed chan struct{}
}

// enter waits (within ctx) for the call's turn.
func (g *callGate) enter(ctx context.Context, alone bool) error {
	queued := false
	for {
		g.mu.Lock()
		if g.changed == nil {
			g.changed = make(chan struct{})
		}
		if !g.alone && ((alone && g.running == 0) || (!alone && g.waiting == 0)) {
			if alone {
				g.alone = true
				if queued {
					g.waiting--
				}
			} else {
				g.running++
			}
			g.mu.Unlock()
			return nil
		}
		if alone && !queued {
			g.waiting++
			queued = true
		}
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			if queued {
				g.mu.Lock()
				g.waiting--
				g.broadcast()
				g.mu.Unlock()
			}
			return ctx.Err()
		}
	}
}

// leave ends a call entered with alone.
func (g *callGate) leave(alone bool) {
	g.mu.Lock()
	if alone {
		g.alone = false
	} else {
		g.running--
	}
	g.broadcast()
	g.mu.Unlock()
}

func (g *callGate) broadcast() {
	if g.changed != nil {
		close(g.changed)
	}
	g.changed = make(chan struct{})
}
