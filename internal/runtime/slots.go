package runtime

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// slotPool bounds how many of something happen at once (sandbox runs,
// warm sandbox starts) and hands a freed slot to the oldest waiter: the
// one whose work began first (a turn's oldest message), not the one that
// asked first. Under a burst, a new chat's turn asks for a run slot only
// once its sandbox has started, after warm chats' younger turns have
// asked; served in arrival order, those passed it, and the messages that
// waited longest waited longer still (the p99 of post-to-answer). Equal
// ages are served in arrival order.
type slotPool struct {
	mu      sync.Mutex
	free    int
	seq     uint64
	waiting slotWaiters
}

func newSlotPool(n int) *slotPool { return &slotPool{free: n} }

// slotWaiter is one Acquire waiting; granted is closed when it holds a
// slot.
type slotWaiter struct {
	since   time.Time
	seq     uint64
	index   int // in the heap; -1 once out of it
	granted chan struct{}
}

// acquire waits for a slot for work that began at since (zero: now) and
// returns nil holding it, or ctx's error holding none.
func (p *slotPool) acquire(ctx context.Context, since time.Time) error {
	if since.IsZero() {
		since = time.Now()
	}
	p.mu.Lock()
	if p.free > 0 && len(p.waiting) == 0 {
		p.free--
		p.mu.Unlock()
		return nil
	}
	p.seq++
	w := &slotWaiter{since: since, seq: p.seq, granted: make(chan struct{})}
	heap.Push(&p.waiting, w)
	p.grantLocked() // a free slot goes to the oldest, which may be w
	p.mu.Unlock()
	select {
	case <-w.granted:
		return nil
	case <-ctx.Done():
		p.mu.Lock()
		if w.index >= 0 {
			heap.Remove(&p.waiting, w.index)
			p.mu.Unlock()
			return ctx.Err()
		}
		p.mu.Unlock()
		p.release() // granted meanwhile: pass it on
		return ctx.Err()
	}
}

// release gives back a slot acquire returned.
func (p *slotPool) release() {
	p.mu.Lock()
	p.free++
	p.grantLocked()
	p.mu.Unlock()
}

// grantLocked hands free slots to the oldest waiters.
func (p *slotPool) grantLocked() {
	for p.free > 0 && len(p.waiting) > 0 {
		w := heap.Pop(&p.waiting).(*slotWaiter)
		p.free--
		close(w.granted)
	}
}

// slotWaiters is a heap of waiters, oldest work first.
type slotWaiters []*slotWaiter

func (h slotWaiters) Len() int { return len(h) }
func (h slotWaiters) Less(i, j int) bool {
	if !h[i].since.Equal(h[j].since) {
		return h[i].since.Before(h[j].since)
	}
	return h[i].seq < h[j].seq
}
func (h slotWaiters) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *slotWaiters) Push(x any) {
	w := x.(*slotWaiter)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *slotWaiters) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	w.index = -1
	*h = old[:len(old)-1]
	return w
}
