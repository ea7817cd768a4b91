package agent_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/agent"
	"github.com/nekro-go/nekro/internal/chat"
)

// However large a chat's messages are, the history prompt stays within
// its caps: each message cut, the oldest left out, and both said.
func TestHistoryPromptIsCapped(t *testing.T) {
	var history []chat.Message
	for i := 1; i <= 100; i++ {
		history = append(history, chat.Message{ID: int64(i), Role: chat.Assistant, SenderID: chat.AssistantID,
			Text: fmt.Sprintf("message %d ", i) + strings.Repeat("A", chat.MaxTextBytes-20), Time: time.Now()})
	}
	last := chat.Message{ID: 101, Role: chat.User, SenderID: "u1", SenderName: "Ann", Text: "what now?", Time: time.Now()}
	history = append(history, last)
	p := agent.HistoryPrompt("c", history, []chat.Message{last})
	if len(p) > agent.MaxPromptHistoryBytes+1024 {
		t.Fatalf("history prompt is %d bytes, over the cap of %d", len(p), agent.MaxPromptHistoryBytes)
	}
	for _, want := range []string{
		`"Ann" (user id u1): what now?`, // the newest are kept
		"message 100 ",
		"Answer the new message(s) #101.",
		"[nekro: the rest of this message, ", // each message is cut
		" older message(s) left out: the history shown is capped at 256 KiB, newest kept]",
	} {
		if !strings.Contains(p, want) {
			t.Fatalf("history prompt lacks %q", want)
		}
	}
	if strings.Contains(p, "message 1 ") {
		t.Fatal("the oldest message was kept over the newest")
	}
	if strings.Contains(p, "different users") {
		t.Fatal("a one-user turn is told it has no user")
	}

	// A short history is shown whole, with no note.
	short := agent.HistoryPrompt("c", []chat.Message{last}, []chat.Message{last})
	if strings.Contains(short, "nekro:") {
		t.Fatalf("short history has a note:\n%s", short)
	}
}

// A turn answering several users is told that it runs for none of them.
func TestHistoryPromptMixedSenders(t *testing.T) {
	a := chat.Message{ID: 1, Role: chat.User, SenderID: "alice", Text: "hi"}
	b := chat.Message{ID: 2, Role: chat.User, SenderID: "bob", Text: "hello"}
	p := agent.HistoryPrompt("c", []chat.Message{a, b}, []chat.Message{a, b})
	if !strings.Contains(p, "These messages come from 2 different users, so your script runs for no user") {
		t.Fatalf("mixed-sender prompt:\n%s", p)
	}
}
