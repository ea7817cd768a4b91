package agent_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/agent"
	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
)

// fakeMemory recalls a fixed block and records what the agent told it.
type fakeMemory struct {
	block string
	mu    sync.Mutex
	ended []string
	reset []string
	asked [][]chat.Message
}

func (m *fakeMemory) Recall(_ context.Context, chatKey string, answering []chat.Message) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.asked = append(m.asked, answering)
	return m.block
}

func (m *fakeMemory) TurnEnded(chatKey string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ended = append(m.ended, chatKey)
}

func (m *fakeMemory) ForgetChat(_ context.Context, chatKey string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reset = append(m.reset, chatKey)
	return nil
}

// The memory's block ends the turn's first user message, recalled for
// the messages the turn answers; the memory hears of every turn's end and
// of a reset. An empty block leaves the prompt as it was.
func TestMemoryHooks(t *testing.T) {
	mem := &fakeMemory{block: "<memories>\n- about the chat: it likes owls\n</memories>\n"}
	l := newLoop(t, func(llmtest.Request) llmtest.Reply { return llmtest.Code("print ok") }, agent.Config{Memory: mem})
	if turn := l.post(t, "m1", "hello owls"); turn.Status != chat.TurnDone {
		t.Fatalf("turn: %+v", turn)
	}
	reqs := l.model.Requests()
	if len(reqs) != 1 || !strings.HasSuffix(reqs[0].Last(), "Reply with one Python script.\n"+mem.block) {
		t.Fatalf("the request does not end with the block:\n%s", reqs[0].Last())
	}
	mem.mu.Lock()
	if len(mem.asked) != 1 || len(mem.asked[0]) != 1 || mem.asked[0][0].Text != "hello owls" {
		t.Fatalf("recalled for %+v", mem.asked)
	}
	if len(mem.ended) != 1 || mem.ended[0] != "m1" {
		t.Fatalf("turn ends told: %v", mem.ended)
	}
	mem.block = ""
	mem.mu.Unlock()

	l.post(t, "m1", "again")
	for deadline := time.Now().Add(60 * time.Second); len(l.model.Requests()) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no second request within 60 s")
		}
	}
	l.waitTurn(t, "m1")
	if last := l.model.Requests()[1].Last(); strings.Contains(last, "<memories>") || !strings.HasSuffix(last, "Reply with one Python script.\n") {
		t.Fatalf("with no memories, the request changed:\n%s", last)
	}
	if err := l.app.Agent.Reset(context.Background(), "m1"); err != nil {
		t.Fatal(err)
	}
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if len(mem.reset) != 1 || mem.reset[0] != "m1" {
		t.Fatalf("resets told: %v", mem.reset)
	}
}
