package schedule_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/kv/kvtest"
	"github.com/nekro-go/nekro/internal/schedule"
)

// opener returns a function opening another handle on one fresh database
// of the kind (as another nekro process would).
func opener(t *testing.T, kind string) func() *schedule.Store {
	ctx := context.Background()
	open := kvtest.DatabaseOpener(t, kind)
	return func() *schedule.Store {
		s, err := schedule.Open(ctx, open())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
}

func each(t *testing.T, f func(t *testing.T, open func() *schedule.Store)) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) { f(t, opener(t, kind)) })
	}
}

// Timers are kept per plugin and chat: a chat lists and clears only its
// own, an id names a timer within its chat only, and setting an id again
// replaces the timer.
func TestTimersBelongToTheirChat(t *testing.T) {
	each(t, func(t *testing.T, open func() *schedule.Store) {
		ctx := context.Background()
		s := open()
		at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		id, err := s.Set(ctx, schedule.Timer{Plugin: "p", Chat: "a", Due: at, Payload: "A"})
		if err != nil || len(id) != 32 {
			t.Fatalf("set: %q %v", id, err)
		}
		if _, err := s.Set(ctx, schedule.Timer{Plugin: "p", Chat: "b", ID: id, Due: at, Payload: "B"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Set(ctx, schedule.Timer{Plugin: "p", Chat: "a", ID: "fixed", Due: at, Payload: "A1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Set(ctx, schedule.Timer{Plugin: "p", Chat: "a", ID: "fixed", Due: at.Add(time.Minute), Payload: "A2"}); err != nil {
			t.Fatal(err)
		}
		a, err := s.List(ctx, "p", "a")
		if err != nil || len(a) != 2 || a[0].Payload != "A" || a[1].Payload != "A2" || !a[1].Due.Equal(at.Add(time.Minute)) {
			t.Fatalf("chat a: %+v %v", a, err)
		}
		if other, _ := s.List(ctx, "q", "a"); len(other) != 0 {
			t.Fatalf("another plugin sees %+v", other)
		}
		if ok, err := s.Clear(ctx, "p", "b", "fixed"); ok || err != nil {
			t.Fatalf("chat b cleared chat a's timer: %v %v", ok, err)
		}
		if ok, err := s.Clear(ctx, "p", "b", id); !ok || err != nil {
			t.Fatalf("clear own: %v %v", ok, err)
		}
		if a, _ := s.List(ctx, "p", "a"); len(a) != 2 {
			t.Fatalf("chat a after b's clear: %+v", a)
		}
		if _, err := s.Set(ctx, schedule.Timer{Plugin: "p", Chat: "a", Cron: "* * *", TZ: "UTC"}); err == nil {
			t.Fatal("3-field cron accepted")
		}
		if _, err := s.Set(ctx, schedule.Timer{Plugin: "p", Chat: "a", Cron: "0 9 * * *", TZ: "Mars/Base"}); err == nil {
			t.Fatal("unknown time zone accepted")
		}
	})
}

// A one-shot timer is claimed once and gone; a recurring one moves to its
// next occurrence in its time zone, missed occurrences fire once, and the
// claim says how late it is.
func TestClaim(t *testing.T) {
	each(t, func(t *testing.T, open func() *schedule.Store) {
		ctx := context.Background()
		s := open()
		now := time.Now()
		s.Set(ctx, schedule.Timer{Plugin: "p", Chat: "a", ID: "once", Due: now.Add(-90 * time.Second), Payload: "x"})
		s.Set(ctx, schedule.Timer{Plugin: "p", Chat: "a", ID: "later", Due: now.Add(time.Hour)})
		s.Set(ctx, schedule.Timer{Plugin: "off", Chat: "a", ID: "off", Due: now.Add(-time.Second)})
		s.Set(ctx, schedule.Timer{Plugin: "p", Chat: "a", ID: "daily", Cron: "30 9 * * *", TZ: "Asia/Shanghai",
			Due: now.Add(-72 * time.Hour)})
		got, err := s.Claim(ctx, now, []string{"p"}, 10)
		if err != nil || len(got) != 2 {
			t.Fatalf("claim: %+v %v", got, err)
		}
		if got[0].ID != "daily" || got[1].ID != "once" || got[1].Payload != "x" ||
			got[1].Late < 89*time.Second || got[1].Late > 91*time.Second || got[0].Late < 71*time.Hour {
			t.Fatalf("claimed %+v", got)
		}
		again, err := s.Claim(ctx, now, []string{"p"}, 10)
		if err != nil || len(again) != 0 {
			t.Fatalf("claimed twice: %+v %v", again, err)
		}
		// The list is in due order: "later" is an hour away, and the
		// daily one's next 09:30 in Shanghai may come before it.
		list, _ := s.List(ctx, "p", "a")
		daily := slices.IndexFunc(list, func(tm schedule.Timer) bool { return tm.ID == "daily" })
		if len(list) != 2 || daily < 0 || !slices.ContainsFunc(list, func(tm schedule.Timer) bool { return tm.ID == "later" }) {
			t.Fatalf("left: %+v", list)
		}
		sh, _ := time.LoadLocation("Asia/Shanghai")
		next := list[daily].Due.In(sh)
		if next.Hour() != 9 || next.Minute() != 30 || !next.After(now) || next.Sub(now) > 24*time.Hour {
			t.Fatalf("next occurrence %v", next)
		}
		if off, _ := s.Claim(ctx, now, []string{"off"}, 10); len(off) != 1 {
			t.Fatalf("plugin off: %+v", off)
		}
	})
}

// Processes claiming at once fire each occurrence once.
func TestClaimIsExclusiveAcrossHandles(t *testing.T) {
	each(t, func(t *testing.T, open func() *schedule.Store) {
		ctx := context.Background()
		stores := []*schedule.Store{open(), open(), open(), open()}
		now := time.Now()
		for i := range 40 {
			s := stores[0]
			if _, err := s.Set(ctx, schedule.Timer{Plugin: "p", Chat: "a", Due: now.Add(-time.Duration(i) * time.Millisecond)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := stores[0].Set(ctx, schedule.Timer{Plugin: "p", Chat: "a", ID: "cron", Cron: "* * * * *", TZ: "UTC", Due: now.Add(-time.Minute)}); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for _, s := range stores {
			wg.Go(func() {
				for range 5 {
					got, err := s.Claim(ctx, now, []string{"p"}, 100)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					for _, f := range got {
						seen[f.ID]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(seen) != 41 {
			t.Fatalf("claimed %d timers, want 41", len(seen))
		}
		for id, n := range seen {
			if n != 1 {
				t.Fatalf("%s claimed %d times", id, n)
			}
		}
	})
}

// A chat's timers wake at most the budget's turns in any hour, counted
// together by every process on the database, and another chat's count is
// its own.
func TestTimerTurnBudgetIsPerChatAndShared(t *testing.T) {
	each(t, func(t *testing.T, open func() *schedule.Store) {
		ctx := context.Background()
		a, b := open(), open()
		now := time.Now()
		var mu sync.Mutex
		granted := 0
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Go(func() {
				s := a
				if i%2 == 1 {
					s = b
				}
				ok, err := s.TakeTurn(ctx, "c1", now.Add(time.Duration(i)*time.Second), 3)
				if err != nil {
					t.Error(err)
				}
				if ok {
					mu.Lock()
					granted++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if granted != 3 {
			t.Errorf("%d turns granted at once, want the budget's 3", granted)
		}
		if ok, _ := a.TakeTurn(ctx, "c2", now, 3); !ok {
			t.Error("another chat's budget is used up by c1's")
		}
		if ok, _ := b.TakeTurn(ctx, "c1", now.Add(59*time.Minute), 3); ok {
			t.Error("a turn granted within the hour")
		}
		if ok, _ := b.TakeTurn(ctx, "c1", now.Add(61*time.Minute), 3); !ok {
			t.Error("no turn an hour later")
		}
		if ok, _ := b.TakeTurn(ctx, "c1", now, 0); !ok {
			t.Error("no budget (0) refused a turn")
		}
	})
}
