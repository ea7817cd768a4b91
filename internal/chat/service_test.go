package chat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

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
				}
				if turn == nil {
					return // nothing waited, or another claim's turn runs
				}
				mu.Lock()
				for _, m := range ms {
					if prev, dup := claims[m.ID]; dup {
						errs <- fmt.Errorf("message %d claimed by turns %d and %d", m.ID, prev, turn.ID)
					}
					claims[m.ID] = turn.ID
				}
				mu.Unlock()
				// A chat runs one turn at a time: the next claim takes
				// what waits once this turn ends.
				turn.Status = chat.TurnDone
				if err := s.FinishTurn(ctx, turn); err != nil {
					errs <- err
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
		} else if turn != nil {
			turn.Status = chat.TurnDone
			s.FinishTurn(ctx, turn)
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
		turn.Status, turn.Iterations, turn.Requests, turn.ModelUS = chat.TurnDone, 1, 2, 1500
		if err := s.FinishTurn(ctx, turn); err != nil {
			t.Fatal(err)
		}
		// A second turn is left running, as a crashed host leaves it: its
		// lease runs out, and a restarted host ends it and hands its
		// message back. While its lease (the default, 10 s) runs, it is
		// not recovered; then its last renewal is a short one, as if its
		// host died right after it (a 100 ms lease from the claim itself
		// ran out on a busy machine before the first look).
		again, _ := s.AddMessage(ctx, userMsg("r", "again"))
		stale, _, _ := s.ClaimTurn(ctx, "r")

		s2 := reopen()
		if rec, err := s2.RecoverExpired(ctx); err != nil || len(rec) != 0 {
			t.Fatalf("a live lease was recovered: %+v %v", rec, err)
		}
		s.SetLeaseTTL(100 * time.Millisecond)
		if renewed, err := s.RenewLeases(ctx, []int64{stale.ID}); err != nil || len(renewed) != 1 {
			t.Fatalf("renew the stale turn's lease: %v %v", renewed, err)
		}
		var rec []chat.Recovered
		for deadline := time.Now().Add(30 * time.Second); len(rec) == 0; time.Sleep(50 * time.Millisecond) {
			var err error
			if rec, err = s2.RecoverExpired(ctx); err != nil {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatal("the stale turn was never recovered")
			}
		}
		if len(rec) != 1 || rec[0].Turn.ID != stale.ID || rec[0].Owner != s.Replica() || rec[0].Released != 1 {
			t.Fatalf("recovered %+v, want turn %d of %s with 1 message", rec, stale.ID, s.Replica())
		}
		if h, _ := s2.History(ctx, "r", 0); len(h) != 3 || h[1].ID != again.ID || h[1].TurnID != 0 ||
			h[2].Role != chat.System || h[2].TurnID != stale.ID || !strings.Contains(h[2].Text, "answered by the next turn") {
			t.Fatalf("after recovery: %+v", h)
		}
		if _, err := s.EndTurn(ctx, stale, chat.TurnEnd{}); !errors.Is(err, chat.ErrTurnLost) {
			t.Fatalf("the recovered turn's owner ended it: %v", err)
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
		keys, err := s2.WaitingChats(ctx)
		slices.Sort(keys)
		if err != nil || !slices.Equal(keys, []string{"r", "w"}) { // r: the message handed back
			t.Fatalf("waiting chats %v %v", keys, err)
		}
		if n, err := s2.Reset(ctx, "r"); err != nil || n != 3 {
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

// No message text over MaxTextBytes is stored, whoever writes it, and the
// error names the size and the limit; the host cuts its own texts with a
// note instead.
func TestMessageTextIsCapped(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t, "sqlite")
	for _, role := range []chat.Role{chat.User, chat.Assistant, chat.System} {
		_, err := s.AddMessage(ctx, chat.Message{ChatKey: "cap", Role: role, SenderID: "x", Text: strings.Repeat("A", chat.MaxTextBytes+1)})
		if !errors.Is(err, chat.ErrTextTooLong) || !strings.Contains(err.Error(), "65537 bytes") || !strings.Contains(err.Error(), "64 KiB") {
			t.Fatalf("%s message over the limit: %v", role, err)
		}
	}
	if _, err := s.AddMessage(ctx, chat.Message{ChatKey: "cap", Role: chat.Assistant, SenderID: "x", Text: strings.Repeat("A", chat.MaxTextBytes)}); err != nil {
		t.Fatalf("a message at the limit: %v", err)
	}
	snd := s.Sender("cap", 0)
	err := snd.SendText(ctx, strings.Repeat("A", 15<<20))
	if !errors.Is(err, chat.ErrTextTooLong) || !strings.Contains(err.Error(), "15728640 bytes") {
		t.Fatalf("SendText of 15 MiB: %v", err)
	}
	if h, _ := s.History(ctx, "cap", 0); len(h) != 1 {
		t.Fatalf("%d messages stored, want only the one at the limit", len(h))
	}

	// The host's records are cut, at a rune boundary, with a note.
	long := strings.Repeat("é", chat.MaxTextBytes) // 2 bytes each
	m, err := snd.Record(ctx, long)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Text) > chat.MaxTextBytes || !utf8.ValidString(m.Text) ||
		!strings.HasSuffix(m.Text, "[nekro: cut here: the text was 131072 bytes, over the 64 KiB limit of a message]") {
		t.Fatalf("recorded text is %d bytes, valid %v, ends %q", len(m.Text), utf8.ValidString(m.Text), m.Text[len(m.Text)-100:])
	}
	if got := chat.TruncateText("short"); got != "short" {
		t.Fatalf("TruncateText changed a short text: %q", got)
	}
}

// One run stores at most MaxRunMessages messages and
// MaxRunAttachmentBytes of attachments; the next run has a new budget.
func TestRunSenderBudget(t *testing.T) {
	ctx := context.Background()
	s, _, layout := openLayout(t, "sqlite")
	snd := s.Sender("budget", 7)
	for i := range chat.MaxRunMessages {
		if err := snd.SendText(ctx, fmt.Sprint("message ", i)); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	err := snd.SendText(ctx, "one too many")
	if !errors.Is(err, chat.ErrRunLimit) || !strings.Contains(err.Error(), "50 messages") {
		t.Fatalf("message 51: %v", err)
	}
	if err := snd.SendFile(ctx, "f.txt", strings.NewReader("x")); !errors.Is(err, chat.ErrRunLimit) {
		t.Fatalf("file past the message budget: %v", err)
	}
	// Results recorded past the budget leave one note, then nothing.
	for range 3 {
		if _, err := snd.Record(ctx, "a result"); !errors.Is(err, chat.ErrRunLimit) {
			t.Fatalf("record past the budget: %v", err)
		}
	}
	h, _ := s.History(ctx, "budget", 0)
	if len(h) != chat.MaxRunMessages+1 || !strings.Contains(h[len(h)-1].Text, "reached its limit of 50 messages") {
		t.Fatalf("%d messages, last %q", len(h), h[len(h)-1].Text)
	}
	if err := s.Sender("budget", 8).SendText(ctx, "next run"); err != nil {
		t.Fatalf("the next run: %v", err)
	}

	// Attachments: 40 MiB fits, 30 MiB more does not and leaves no file;
	// what is left still fits.
	snd = s.Sender("budget", 9)
	if err := snd.SendFile(ctx, "big.bin", bytes.NewReader(make([]byte, 40<<20))); err != nil {
		t.Fatal(err)
	}
	err = snd.SendFile(ctx, "more.bin", bytes.NewReader(make([]byte, 30<<20)))
	if !errors.Is(err, chat.ErrRunLimit) || !strings.Contains(err.Error(), "over 64 MiB, the most one run may send") {
		t.Fatalf("attachments over the run's budget: %v", err)
	}
	if _, err := os.Stat(filepath.Join(layout.UploadsDir("budget"), "more.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused attachment was kept: %v", err)
	}
	if err := snd.SendFile(ctx, "rest.bin", bytes.NewReader(make([]byte, 24<<20))); err != nil {
		t.Fatalf("an attachment within what is left: %v", err)
	}
	if err := snd.SendFile(ctx, "one.bin", strings.NewReader("x")); !errors.Is(err, chat.ErrRunLimit) {
		t.Fatalf("an attachment once the budget is used up: %v", err)
	}
}

// A run record does not keep a huge agent result (a multimodal answer's
// images), only a note of its size.
func TestRunRecordsCapAgentResults(t *testing.T) {
	forEachDB(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		s, _ := open(t, kind)
		big, _ := json.Marshal(strings.Repeat("x", chat.MaxRecordedAgentResult+10))
		if err := s.RecordRun(ctx, chat.Run{RunID: "big", ChatKey: "b", StopType: "AGENT", AgentResult: big}); err != nil {
			t.Fatal(err)
		}
		runs, err := s.Runs(ctx, "b")
		if err != nil || len(runs) != 1 {
			t.Fatal(runs, err)
		}
		var note string
		if err := json.Unmarshal(runs[0].AgentResult, &note); err != nil || !strings.Contains(note, "not kept in run records") {
			t.Errorf("stored agent result: %.80s (%v)", runs[0].AgentResult, err)
		}
	})
}

// The chat list on both databases: most recently active first, the last
// message and the latest turn's state, paged by message id.
func TestChatsListsRecentFirst(t *testing.T) {
	forEachDB(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		s, _ := open(t, kind)
		for _, c := range []string{"a", "b", "c"} {
			if _, err := s.AddMessage(ctx, userMsg(c, "hello "+c)); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := s.ClaimTurn(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AddMessage(ctx, userMsg("a", "again")); err != nil {
			t.Fatal(err)
		}
		page, err := s.Chats(ctx, 2, 0)
		if err != nil || len(page) != 2 || page[0].ChatKey != "a" || page[0].LastMessage.Text != "again" || page[1].ChatKey != "c" {
			t.Fatalf("page 1: %+v %v", page, err)
		}
		rest, err := s.Chats(ctx, 2, page[1].LastMessage.ID)
		if err != nil || len(rest) != 1 || rest[0].ChatKey != "b" || rest[0].TurnState != chat.TurnRunning {
			t.Fatalf("page 2: %+v %v", rest, err)
		}
	})
}
