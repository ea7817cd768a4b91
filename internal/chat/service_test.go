package chat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/kv/kvtest"
)

// open returns a service on a fresh database of the given kind, and a
// function that opens a second service on the same database (as a
// restarted host would).
func open(t *testing.T, kind string) (*chat.Service, func() *chat.Service) {
	s, reopen, _ := openLayout(t, kind)
	return s, reopen
}

func openLayout(t *testing.T, kind string) (*chat.Service, func() *chat.Service, files.Layout) {
	t.Helper()
	ctx := context.Background()
	layout, err := files.NewLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var mk func() *chat.Service
	switch kind {
	case "sqlite":
		mk = func() *chat.Service {
			d, err := db.OpenSQLite(ctx, layout.Database(), db.SQLiteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s, err := chat.Open(ctx, chat.Database{SQLite: d}, layout, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close(); d.Close() })
			return s
		}
	case "postgres":
		u := kvtest.FreshSchema(t, kvtest.PostgresURL(t))
		mk = func() *chat.Service {
			pool, err := db.OpenPostgres(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			s, err := chat.Open(ctx, chat.Database{Postgres: pool}, layout, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close(); pool.Close() })
			return s
		}
	}
	return mk(), mk, layout
}

// forEachDB runs the test on SQLite and on PostgreSQL.
func forEachDB(t *testing.T, f func(t *testing.T, kind string)) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) { f(t, kind) })
	}
}

func userMsg(chatKey, text string) chat.Message {
	return chat.Message{ChatKey: chatKey, Role: chat.User, SenderID: "u1", SenderName: "Ann", Text: text}
}

func TestHistoryOrderLimitAndReopen(t *testing.T) {
	forEachDB(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		s, reopen := open(t, kind)
		for i := range 5 {
			if _, err := s.AddMessage(ctx, userMsg("a", fmt.Sprint("m", i))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.AddMessage(ctx, userMsg("b", "other chat")); err != nil {
			t.Fatal(err)
		}
		att := []chat.Attachment{{Name: "x.png", Kind: "image", Path: "/app/uploads/x.png", MIME: "image/png", Size: 3}}
		if _, err := s.AddMessage(ctx, chat.Message{ChatKey: "a", Role: chat.Assistant, SenderID: chat.AssistantID,
			SenderName: "assistant", Attachments: att}); err != nil {
			t.Fatal(err)
		}
		all, err := s.History(ctx, "a", 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range all {
			got = append(got, m.Text)
		}
		if strings.Join(got, ",") != "m0,m1,m2,m3,m4," {
			t.Fatalf("history %q", got)
		}
		last, _ := s.History(ctx, "a", 2)
		if len(last) != 2 || last[0].Text != "m4" || len(last[1].Attachments) != 1 || last[1].Attachments[0] != att[0] {
			t.Fatalf("last two: %+v", last)
		}
		again, err := reopen().History(ctx, "a", 0)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(all)
		b, _ := json.Marshal(again)
		if !bytes.Equal(a, b) {
			t.Fatalf("history changed across reopen:\n%s\n%s", a, b)
		}
	})
}

// Concurrent claims never hand one message to two turns, and every
// message is claimed.
func TestClaimTurnExactlyOnce(t *testing.T) {
	forEachDB(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		s, _ := open(t, kind)
		const n = 40
		var wg sync.WaitGroup
		var mu sync.Mutex
		claims := map[int64]int64{} // message -> turn
		errs := make(chan error, 2*n)
		for i := range n {
			wg.Go(func() {
				if _, err := s.AddMessage(ctx, userMsg("c", fmt.Sprint(i))); err != nil {
					errs <- err
				}
			})
			wg.Go(func() {
				turn, ms, err := s.ClaimTurn(ctx, "c")
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, m := range ms {
					if prev, dup := claims[m.ID]; dup {
						errs <- fmt.Errorf("message %d claimed by turns %d and %d", m.ID, prev, turn.ID)
					}
					claims[m.ID] = turn.ID
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		// Whatever the race left waiting, one more claim takes.
		if turn, ms, err := s.ClaimTurn(ctx, "c"); err != nil {
			t.Fatal(err)
		} else {
			for _, m := range ms {
				claims[m.ID] = turn.ID
			}
		}
		if len(claims) != n {
			t.Fatalf("%d of %d messages claimed", len(claims), n)
		}
		hist, _ := s.History(ctx, "c", 0)
		for _, m := range hist {
			if m.TurnID != claims[m.ID] {
				t.Fatalf("message %d stored with turn %d, claimed by %d", m.ID, m.TurnID, claims[m.ID])
			}
		}
		if turn, _, err := s.ClaimTurn(ctx, "c"); err != nil || turn != nil {
			t.Fatalf("claim with nothing waiting: %+v %v", turn, err)
		}
	})
}

func TestTurnsRunsResetAndRecovery(t *testing.T) {
	forEachDB(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		s, reopen := open(t, kind)
		s.AddMessage(ctx, userMsg("r", "hello"))
		turn, _, err := s.ClaimTurn(ctx, "r")
		if err != nil || turn == nil {
			t.Fatal(turn, err)
		}
		run := chat.Run{RunID: "run-1", ChatKey: "r", TurnID: turn.ID, Iteration: 1, Code: "print(1)", Output: "1\n",
			StopType: "AGENT", ExitCode: 8, DurationMS: 12, Calls: json.RawMessage(`[{"method":"search_kb","duration_us":5}]`),
			AgentMethod: "search_kb", AgentResult: json.RawMessage(`"found"`)}
		if err := s.RecordRun(ctx, run); err != nil {
			t.Fatal(err)
		}
		// A second turn is left running, as a crashed host leaves it.
		s.AddMessage(ctx, userMsg("r", "again"))
		stale, _, _ := s.ClaimTurn(ctx, "r")
		turn.Status, turn.Iterations, turn.Requests, turn.ModelUS = chat.TurnDone, 1, 2, 1500
		if err := s.FinishTurn(ctx, turn); err != nil {
			t.Fatal(err)
		}

		s2 := reopen()
		if n, err := s2.InterruptStale(ctx); err != nil || n != 1 {
			t.Fatalf("interrupted %d, %v", n, err)
		}
		turns, err := s2.Turns(ctx, "r")
		if err != nil || len(turns) != 2 {
			t.Fatal(turns, err)
		}
		if turns[0].Status != chat.TurnDone || turns[0].Requests != 2 || turns[0].ModelUS != 1500 || turns[0].FinishedAt.IsZero() {
			t.Fatalf("turn %+v", turns[0])
		}
		if turns[1].ID != stale.ID || turns[1].Status != chat.TurnInterrupted {
			t.Fatalf("stale turn %+v", turns[1])
		}
		runs, err := s2.Runs(ctx, "r")
		if err != nil || len(runs) != 1 {
			t.Fatal(runs, err)
		}
		got := runs[0]
		got.Time = run.Time
		if got.Code != run.Code || got.StopType != "AGENT" || string(got.AgentResult) != `"found"` ||
			string(got.Calls) != string(run.Calls) || got.TurnID != turn.ID || got.Time.IsZero() != run.Time.IsZero() {
			t.Fatalf("run %+v", runs[0])
		}

		s2.AddMessage(ctx, userMsg("w", "waiting"))
		if keys, err := s2.WaitingChats(ctx); err != nil || !slices.Equal(keys, []string{"w"}) {
			t.Fatalf("waiting chats %v %v", keys, err)
		}
		if n, err := s2.Reset(ctx, "r"); err != nil || n != 2 {
			t.Fatalf("reset deleted %d, %v", n, err)
		}
		if h, _ := s2.History(ctx, "r", 0); len(h) != 0 {
			t.Fatalf("history after reset: %+v", h)
		}
		if h, _ := s2.History(ctx, "w", 0); len(h) != 1 {
			t.Fatalf("reset touched another chat: %+v", h)
		}
		if runs, _ := s2.Runs(ctx, "r"); len(runs) != 1 {
			t.Fatal("reset removed the execution records")
		}
	})
}

func TestSenderStoresAttachmentsUnderUploads(t *testing.T) {
	ctx := context.Background()
	s, _, layout := openLayout(t, "sqlite")
	events, stop := s.Subscribe("f")
	defer stop()
	snd := s.Sender("f", 0)
	if err := snd.SendText(ctx, "hi"); err != nil {
		t.Fatal(err)
	}
	if err := snd.SendFile(ctx, "notes.txt", strings.NewReader("one")); err != nil {
		t.Fatal(err)
	}
	if err := snd.SendFile(ctx, "notes.txt", strings.NewReader("two")); err != nil {
		t.Fatal(err)
	}
	png := append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 32)...)
	if err := snd.SendImage(ctx, "../../evil.png", bytes.NewReader(png)); err != nil {
		t.Fatal(err)
	}
	err := snd.SendImage(ctx, "fake.png", strings.NewReader("not an image"))
	if err == nil || !strings.Contains(err.Error(), "fake.png is not an image") {
		t.Fatalf("non-image sent as image: %v", err)
	}
	if err := snd.SendText(ctx, "  "); err == nil {
		t.Fatal("empty text accepted")
	}
	h, _ := s.History(ctx, "f", 0)
	var paths []string
	for _, m := range h {
		for _, a := range m.Attachments {
			paths = append(paths, a.Kind+" "+a.Path)
		}
	}
	want := []string{"file /app/uploads/notes.txt", "file /app/uploads/notes-1.txt", "image /app/uploads/.._.._evil.png"}
	if !slices.Equal(paths, want) {
		t.Fatalf("attachments %q, want %q", paths, want)
	}
	for name, content := range map[string]string{"notes.txt": "one", "notes-1.txt": "two"} {
		b, err := os.ReadFile(filepath.Join(layout.UploadsDir("f"), name))
		if err != nil || string(b) != content {
			t.Fatalf("%s: %q %v", name, b, err)
		}
	}
	for i, want := range []string{"hi", "", "", ""} {
		e := <-events
		if e.Type != chat.EventMessage || e.Message.Text != want || e.Message.Role != chat.Assistant {
			t.Fatalf("event %d: %+v", i, e)
		}
	}
}
