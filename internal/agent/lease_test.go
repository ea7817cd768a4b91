package agent_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/agent"
	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
)

// A turn whose lease this replica could not renew (here: it ran out under
// it, as when the database was away longer than the lease) is stopped at
// once, says so in the chat, and hands its message back: the next turn
// answers it.
func TestTurnStopsWhenItsLeaseIsLost(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var asked atomic.Int32
	l := newLoop(t, func(r llmtest.Request) llmtest.Reply {
		if asked.Add(1) == 1 {
			<-release // the first turn waits for the model until the test ends
		}
		return llmtest.Reply{Text: "I answer you."}
	}, agent.Config{})
	l.app.Chats.SetLeaseTTL(800 * time.Millisecond)
	ctx := context.Background()
	if err := l.app.Agent.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.app.Agent.Post(ctx, agent.Incoming{ChatKey: "lease", UserID: "u1", Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); asked.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the model was never asked")
		}
	}
	if _, err := l.app.DB.SQLite.Write.ExecContext(ctx, `UPDATE chat_turns SET lease_until = 0 WHERE status = 'running'`); err != nil {
		t.Fatal(err)
	}
	var turns []chat.Turn
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if turns, err = l.app.Chats.Turns(ctx, "lease"); err != nil {
			t.Fatal(err)
		}
		if len(turns) == 2 && turns[1].Status == chat.TurnDone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("turns: %+v\nhistory:\n%s", turns, l.history(t, "lease"))
		}
	}
	if turns[0].Status != chat.TurnInterrupted {
		t.Fatalf("the first turn: %+v", turns[0])
	}
	h := l.history(t, "lease")
	if !strings.Contains(h, "answered by the next turn") || !strings.Contains(h, "assistant: I answer you.") ||
		strings.Count(h, "assistant:") != 1 {
		t.Fatalf("history:\n%s", h)
	}
	ms, _ := l.app.Chats.History(ctx, "lease", 0)
	if ms[0].TurnID != turns[1].ID {
		t.Fatalf("the message is answered by turn %d, not the second (%d)", ms[0].TurnID, turns[1].ID)
	}
}
