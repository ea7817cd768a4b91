package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/agent"
	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
)

// A turn that cannot store its answer because the disk is full hands its
// message back, and the chat then waits for the storage: the model is
// not asked again while the disk stays full, and is asked once more when
// space is back, which answers the message.
func TestAFullDiskHoldsTheChatInsteadOfAskingAgain(t *testing.T) {
	var asked atomic.Int32
	var full atomic.Bool
	full.Store(true)
	l := newLoop(t, func(r llmtest.Request) llmtest.Reply {
		asked.Add(1)
		return llmtest.Reply{Text: "I answer you."}
	}, agent.Config{Storage: func() error {
		if full.Load() {
			return errors.New("the disk is full")
		}
		return nil
	}})
	ctx := context.Background()
	w := l.app.DB.SQLite.Write
	if _, err := w.ExecContext(ctx, `CREATE TRIGGER test_full BEFORE INSERT ON chat_messages WHEN NEW.role = 'assistant'
		BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END`); err != nil {
		t.Fatal(err)
	}
	if err := l.app.Agent.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.app.Agent.Post(ctx, agent.Incoming{ChatKey: "full", UserID: "u1", Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); asked.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the model was never asked")
		}
	}
	// Several polls long (one a second): without the hold, each would
	// start a turn that asks the model again.
	time.Sleep(4 * time.Second)
	if n := asked.Load(); n != 1 {
		t.Fatalf("the model was asked %d times while the disk stayed full", n)
	}
	if _, err := w.ExecContext(ctx, `DROP TRIGGER test_full`); err != nil {
		t.Fatal(err)
	}
	full.Store(false)
	var turns []chat.Turn
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if turns, err = l.app.Chats.Turns(ctx, "full"); err != nil {
			t.Fatal(err)
		}
		if len(turns) >= 2 && turns[len(turns)-1].Status == chat.TurnDone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("turns: %+v\nhistory:\n%s", turns, l.history(t, "full"))
		}
	}
	if len(turns) != 2 || turns[0].Status != chat.TurnInterrupted || asked.Load() != 2 {
		t.Fatalf("turns %+v, model asked %d times", turns, asked.Load())
	}
	if h := l.history(t, "full"); !strings.Contains(h, "the disk is full") || strings.Count(h, "assistant: I answer you.") != 1 {
		t.Fatalf("history:\n%s", h)
	}
}
