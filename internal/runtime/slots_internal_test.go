package runtime

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// waitersOf waits until n acquires wait on p.
func waitersOf(t *testing.T, p *slotPool, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p.mu.Lock()
		got := len(p.waiting)
		p.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiting, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A freed slot goes to the waiter whose work began first, whatever the
// order they asked in; work of the same age is served in the order asked.
func TestSlotsServeTheOldestWorkFirst(t *testing.T) {
	p := newSlotPool(1)
	ctx := context.Background()
	if err := p.acquire(ctx, time.Time{}); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Minute)
	ages := []time.Duration{3, 1, 2, 1} // seconds after base, in the order asked
	served := make(chan int, len(ages))
	for i, a := range ages {
		go func() {
			if err := p.acquire(ctx, base.Add(a*time.Second)); err != nil {
				t.Error(err)
				return
			}
			served <- i
		}()
		waitersOf(t, p, i+1)
	}
	var order []int
	for range ages {
		p.release()
		order = append(order, <-served)
	}
	if want := []int{1, 3, 2, 0}; !slices.Equal(order, want) {
		t.Errorf("served %v, want %v (oldest first, then as asked)", order, want)
	}
	p.release()
	if p.free != 1 {
		t.Errorf("%d slots free at the end, want 1", p.free)
	}
}

// A waiter that gives up leaves the queue and holds nothing; the others
// are still served.
func TestSlotsWaiterThatGivesUpHoldsNothing(t *testing.T) {
	p := newSlotPool(1)
	if err := p.acquire(context.Background(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- p.acquire(ctx, time.Now().Add(-time.Hour)) }()
	waitersOf(t, p, 1)
	got := make(chan error, 1)
	go func() { got <- p.acquire(context.Background(), time.Time{}) }()
	waitersOf(t, p, 2)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Errorf("the waiter that gave up: %v", err)
	}
	p.release()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the slot did not pass to the waiter left")
	}
	p.release()
	if p.free != 1 || len(p.waiting) != 0 {
		t.Errorf("free %d, waiting %d at the end; want 1 and 0", p.free, len(p.waiting))
	}
}
