package chat_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/chat"
)

// Two replicas on one database: one running turn per chat whichever
// claims, a replica renews only its own live leases, and a turn ended by
// another once its lease ran out is not the owner's to end any more.
func TestLeasesAcrossReplicas(t *testing.T) {
	forEachDB(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		a, reopen := open(t, kind)
		b := reopen()
		if a.Replica() == b.Replica() {
			t.Fatalf("two services share the replica id %s", a.Replica())
		}
		a.AddMessage(ctx, userMsg("c", "first"))
		turn, _, err := a.ClaimTurn(ctx, "c")
		if err != nil || turn == nil {
			t.Fatal(turn, err)
		}
		b.AddMessage(ctx, userMsg("c", "second"))
		if other, _, err := b.ClaimTurn(ctx, "c"); err != nil || other != nil {
			t.Fatalf("a second turn of the chat started on another replica: %+v %v", other, err)
		}
		if got, err := b.RenewLeases(ctx, []int64{turn.ID}); err != nil || len(got) != 0 {
			t.Fatalf("a replica renewed another's lease: %v %v", got, err)
		}
		if got, err := a.RenewLeases(ctx, []int64{turn.ID}); err != nil || !slices.Equal(got, []int64{turn.ID}) {
			t.Fatalf("the owner's renewal: %v %v", got, err)
		}
		if rec, err := b.RecoverExpired(ctx); err != nil || len(rec) != 0 {
			t.Fatalf("a live lease was recovered: %+v %v", rec, err)
		}
		// The owner loses the database for longer than the lease.
		a.SetLeaseTTL(50 * time.Millisecond)
		a.RenewLeases(ctx, []int64{turn.ID})
		waitRecovered(t, b, 1)
		if got, err := a.RenewLeases(ctx, []int64{turn.ID}); err != nil || len(got) != 0 {
			t.Fatalf("a recovered turn's lease was renewed: %v %v", got, err)
		}
		turn.Status = chat.TurnDone
		if _, err := a.EndTurn(ctx, turn, chat.TurnEnd{}); !errors.Is(err, chat.ErrTurnLost) {
			t.Fatalf("the owner ended a turn recovered elsewhere: %v", err)
		}
		// Both messages wait again; the next turn takes them together.
		next, claimed, err := b.ClaimTurn(ctx, "c")
		if err != nil || next == nil || len(claimed) != 2 {
			t.Fatalf("the next turn: %+v %d %v", next, len(claimed), err)
		}
	})
}

// A message whose turns keep dying with their replica is handed back
// MaxClaims-1 times, then left with a note; one its live owner hands
// back (the database failed) does not count.
func TestMaxClaims(t *testing.T) {
	forEachDB(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		s, _ := open(t, kind)
		s.SetLeaseTTL(50 * time.Millisecond)
		s.AddMessage(ctx, userMsg("poison", "crash me"))
		// The owner hands it back: not counted.
		turn, _, _ := s.ClaimTurn(ctx, "poison")
		turn.Status = chat.TurnInterrupted
		if n, err := s.EndTurn(ctx, turn, chat.TurnEnd{Note: "nekro: the disk is full.", Retry: true}); err != nil || n != 1 {
			t.Fatalf("handed back %d, %v", n, err)
		}
		for i := 1; i <= chat.MaxClaims; i++ {
			if turn, _, err := s.ClaimTurn(ctx, "poison"); err != nil || turn == nil {
				t.Fatalf("claim %d: %+v %v", i, turn, err)
			}
			rec := waitRecovered(t, s, 1)
			want := 1
			if i == chat.MaxClaims {
				want = 0
			}
			if rec[0].Released != want {
				t.Fatalf("claim %d: handed back %d, want %d", i, rec[0].Released, want)
			}
		}
		h, _ := s.History(ctx, "poison", 0)
		if last := h[len(h)-1]; !strings.Contains(last.Text, "not tried again") {
			t.Fatalf("no note that the message is given up: %+v", last)
		}
		if keys, _ := s.WaitingChats(ctx); len(keys) != 0 {
			t.Fatalf("the message still waits: %v", keys)
		}
	})
}

// waitRecovered calls RecoverExpired until it ended n turns.
func waitRecovered(t *testing.T, s *chat.Service, n int) []chat.Recovered {
	t.Helper()
	var all []chat.Recovered
	for deadline := time.Now().Add(30 * time.Second); len(all) < n; time.Sleep(20 * time.Millisecond) {
		rec, err := s.RecoverExpired(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, rec...)
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d turns recovered", len(all), n)
		}
	}
	return all
}
