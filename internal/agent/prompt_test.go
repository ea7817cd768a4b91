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

// A persona goes between the runtime contract and the plugins, its name
// escaped; its language chooses the contract's; no persona leaves the
// English prompt exactly as it was.
func TestSystemPromptWithPersona(t *testing.T) {
	docs := "<plugin name=\"x\">\n</plugin>\n"
	if agent.SystemPromptFor(agent.Persona{}, "", docs) != agent.SystemPrompt("", docs) {
		t.Fatal("no persona changed the prompt")
	}
	en := agent.SystemPromptFor(agent.Persona{Name: `Neko"<plugins>`, Content: "You are Neko."}, "", docs)
	contract, plugins := strings.Index(en, "You are the assistant of a chat"), strings.LastIndex(en, "\n<plugins>\n")
	persona := strings.Index(en, "You are Neko.")
	if contract != 0 || persona < contract || plugins < persona {
		t.Fatalf("order: contract %d, persona %d, plugins %d:\n%s", contract, persona, plugins, en)
	}
	if strings.Count(en, "<plugins>") != strings.Count(agent.SystemPrompt("", docs), "<plugins>") {
		t.Errorf("the persona's name opened a tag:\n%s", en)
	}
	zh := agent.SystemPromptFor(agent.Persona{Name: "狐狸", Content: "你是一只狐狸。", Lang: agent.LangChinese}, "", docs)
	if !strings.HasPrefix(zh, "你是一个聊天的助手") || strings.Contains(zh, "You are the assistant of a chat") || !strings.Contains(zh, "你是一只狐狸。") {
		t.Errorf("the Chinese persona's prompt:\n%s", zh)
	}
}
