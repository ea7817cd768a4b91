package chat_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/files"
)

func platformOf(chatKey string) (string, bool) {
	p, _, ok := strings.Cut(chatKey, "-")
	return p, ok
}

func answer(chatKey, text string) chat.Message {
	return chat.Message{ChatKey: chatKey, Role: chat.Assistant, SenderID: chat.AssistantID, SenderName: "assistant", Text: text}
}

// The outbox across two replicas: only platform chats' assistant
// messages wait in it; each chat's messages are claimed in order, one at
// a time; a claim is the claimer's until its lease runs out, after which
// another replica claims it again (a sender that died); a delivery sent
// is gone; one retried waits its backoff.
func TestOutboxAcrossReplicas(t *testing.T) {
	forEachDB(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		a, reopen := open(t, kind)
		b := reopen()
		var woken atomic.Int32
		for _, s := range []*chat.Service{a, b} {
			s.SetOutbox(platformOf)
		}
		a.OnDelivery(func(platform string) {
			if platform == "im" {
				woken.Add(1)
			}
		})
		a.AddMessage(ctx, answer("plain", "no platform: not queued"))
		a.AddMessage(ctx, userMsg("im-1", "a user's message: not queued"))
		m1, _ := a.AddMessage(ctx, answer("im-1", "one"))
		m2, _ := b.AddMessage(ctx, answer("im-1", "two"))
		m3, _ := b.AddMessage(ctx, answer("im-2", "three"))
		if woken.Load() < 1 {
			t.Fatal("recording a delivery woke no sender")
		}
		if n, err := a.PendingDeliveries(ctx); err != nil || n["im"] != 3 || len(n) != 1 {
			t.Fatalf("pending: %v %v", n, err)
		}

		ds, err := b.ClaimDeliveries(ctx, "im", 10)
		if err != nil || len(ds) != 2 || ds[0].Message.ID != m1.ID || ds[1].Message.ID != m3.ID || ds[0].Attempts != 1 {
			t.Fatalf("first claim: want one per chat, oldest first: %+v %v", ds, err)
		}
		if ds[0].Message.Text != "one" {
			t.Fatalf("the claimed message: %+v", ds[0].Message)
		}
		if more, err := a.ClaimDeliveries(ctx, "im", 10); err != nil || len(more) != 0 {
			t.Fatalf("another replica claimed leased deliveries: %+v %v", more, err)
		}
		if err := a.Delivered(ctx, m1.ID); !errors.Is(err, chat.ErrDeliveryLost) {
			t.Fatalf("a replica settled another's delivery: %v", err)
		}
		if err := b.Delivered(ctx, m1.ID); err != nil {
			t.Fatal(err)
		}
		ds, err = a.ClaimDeliveries(ctx, "im", 10)
		if err != nil || len(ds) != 1 || ds[0].Message.ID != m2.ID {
			t.Fatalf("after the chat's first was sent, its second: %+v %v", ds, err)
		}
		if err := a.RetryDelivery(ctx, m2.ID, time.Hour, "platform said no"); err != nil {
			t.Fatal(err)
		}
		if ok, err := a.DeliveriesWaiting(ctx, "im"); err != nil || ok {
			t.Fatalf("a delivery backing off is waiting: %v %v", ok, err)
		}

		// b dies holding m3: once its lease runs out, a claims it.
		b.SetLeaseTTL(50 * time.Millisecond)
		if ok, err := b.RenewDelivery(ctx, m3.ID); err != nil || !ok {
			t.Fatalf("renew: %v %v", ok, err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			ds, err = a.ClaimDeliveries(ctx, "im", 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a dead sender's delivery was never claimed again")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if ds[0].Message.ID != m3.ID || ds[0].Attempts != 2 {
			t.Fatalf("claimed again: %+v", ds[0])
		}
		if ok, err := b.RenewDelivery(ctx, m3.ID); err != nil || ok {
			t.Fatalf("the dead sender renewed a delivery claimed since: %v %v", ok, err)
		}
		if err := a.Delivered(ctx, m3.ID); err != nil {
			t.Fatal(err)
		}
		if n, err := a.ExpireDeliveries(ctx, 0); err != nil || n != 1 {
			t.Fatalf("expire the one left: %d %v", n, err)
		}
		if n, _ := a.PendingDeliveries(ctx); len(n) != 0 {
			t.Fatalf("left: %v", n)
		}
	})
}

// A turn's notice to a platform chat's users is queued with the turn's
// end, in its transaction.
func TestOutboxQueuesTurnNotices(t *testing.T) {
	forEachDB(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		s, _ := open(t, kind)
		s.SetOutbox(platformOf)
		s.AddMessage(ctx, userMsg("im-9", "hello"))
		turn, _, err := s.ClaimTurn(ctx, "im-9")
		if err != nil || turn == nil {
			t.Fatal(turn, err)
		}
		turn.Status = chat.TurnFailed
		if _, err := s.EndTurn(ctx, turn, chat.TurnEnd{Note: "the model failed", Notice: "Sorry, I could not answer."}); err != nil {
			t.Fatal(err)
		}
		ds, err := s.ClaimDeliveries(ctx, "im", 10)
		if err != nil || len(ds) != 1 || ds[0].Message.Text != "Sorry, I could not answer." {
			t.Fatalf("the notice's delivery: %+v %v", ds, err)
		}
	})
}

// What the outbox adds to one answer of a platform chat on SQLite, one
// host: the answer stored in a transaction with its outbox row, claimed,
// and deleted once sent, against the answer stored alone.
func BenchmarkOutbox(b *testing.B) {
	ctx := context.Background()
	for _, mode := range []string{"without", "with"} {
		b.Run(mode, func(b *testing.B) {
			s := openBench(b)
			if mode == "with" {
				s.SetOutbox(platformOf)
			}
			for b.Loop() {
				m, err := s.AddMessage(ctx, answer("im-1", "an answer"))
				if err != nil {
					b.Fatal(err)
				}
				if mode == "with" {
					ds, err := s.ClaimDeliveries(ctx, "im", 16)
					if err != nil || len(ds) != 1 {
						b.Fatal(ds, err)
					}
					if err := s.Delivered(ctx, m.ID); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// openBench opens a service on a fresh SQLite database.
func openBench(b *testing.B) *chat.Service {
	ctx := context.Background()
	layout, err := files.NewLayout(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	d, err := db.OpenSQLite(ctx, layout.Database(), db.SQLiteOptions{})
	if err != nil {
		b.Fatal(err)
	}
	s, err := chat.Open(ctx, chat.Database{SQLite: d}, layout, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(); d.Close() })
	return s
}
