package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/memory"
)

// memoryModel answers the memory model's requests with one memory about
// the writer of each "remember: X" message, and turns in words.
func memoryModel(r llmtest.Request) llmtest.Reply {
	if len(r.Messages) == 0 || !strings.HasPrefix(r.Messages[0].Content.String(), "You keep the long-term memory") {
		return llmtest.Reply{Text: "Noted, thank you."}
	}
	_, news, _ := strings.Cut(r.Last(), "<new_messages>")
	var ops []string
	for _, line := range strings.Split(news, "\n") {
		if _, fact, ok := strings.Cut(line, "remember: "); ok {
			who := line[strings.Index(line, `(user id "`)+len(`(user id "`):]
			ops = append(ops, fmt.Sprintf(`{"op": "add", "about": "user", "user_id": %q, "text": %q}`, who[:strings.Index(who, `"`)], fact))
		}
	}
	return llmtest.Reply{Text: `{"operations": [` + strings.Join(ops, ", ") + `]}`}
}

// waitMemories waits until chatKey holds n memories (as the operator sees
// them) and returns them.
func (e *env) waitMemories(chatKey string, n int) []memory.Memory {
	e.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var out struct{ Memories []memory.Memory }
		if st := e.call("GET", "/api/chats/"+chatKey+"/memories", nil, &out); st != http.StatusOK {
			e.t.Fatalf("GET memories: %d", st)
		}
		if len(out.Memories) == n {
			return out.Memories
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("chat %s: %d memories after 30s, want %d", chatKey, len(out.Memories), n)
		}
	}
}

// Memories through the API: the operator sees every memory of a chat, a
// member the chat's and their own, never another user's, and may delete
// only those; the chat page lists the chat's memories and forgets one
// with its button, in a real browser.
func TestMemoriesAPIAndPage(t *testing.T) {
	e := startEnv(t, memoryModel, func(o *serveOptions) {
		o.App.Memory = memory.Options{Enabled: true, MinMessages: 1, PerHour: 100}
	})
	e.post("mem", "alice", "Alice", "remember: alice grows tomatoes")
	e.waitMemories("mem", 1)
	e.post("mem", "bob", "Bob", "remember: bob fixes bikes")
	ms := e.waitMemories("mem", 2)
	var alices, bobs memory.Memory
	for _, m := range ms {
		if m.UserID == "alice" {
			alices = m
		} else {
			bobs = m
		}
	}

	// Alice, a member with a token of her own, sees hers and not Bob's.
	var tok struct{ Token string }
	if st := e.call("POST", "/api/users", map[string]string{"user_id": "alice"}, &tok); st != http.StatusCreated || tok.Token == "" {
		t.Fatalf("add user: %d %+v", st, tok)
	}
	if st := e.call("PUT", "/api/chats/mem/members/alice", nil, nil); st/100 != 2 {
		t.Fatalf("add member: %d", st)
	}
	var seen struct{ Memories []memory.Memory }
	if st := e.callToken(tok.Token, "GET", "/api/chats/mem/memories", nil, &seen); st != http.StatusOK ||
		len(seen.Memories) != 1 || seen.Memories[0].ID != alices.ID {
		t.Fatalf("alice sees %d %+v", st, seen.Memories)
	}
	if st := e.callToken(tok.Token, "DELETE", fmt.Sprintf("/api/chats/mem/memories/%d", bobs.ID), nil, nil); st != http.StatusNotFound {
		t.Fatalf("alice deleting bob's memory: %d, want 404", st)
	}
	if st := e.callToken(tok.Token, "GET", "/api/chats/other/memories", nil, nil); st != http.StatusNotFound {
		t.Fatalf("alice listing another chat's memories: %d, want 404", st)
	}
	if st := e.call("DELETE", "/api/chats/mem/memories/abc", nil, nil); st != http.StatusBadRequest {
		t.Fatalf("a bad id: %d", st)
	}

	// The page: the operator forgets Bob's memory with its button.
	log, _ := drive(t, e, "token="+testToken+"&chat=mem", fmt.Sprintf(`
  await opened("mem", "assistant");
  $("memories").open = true;
  const items = () => [...document.querySelectorAll("#memory-list li")];
  await until("the memories", () => items().length === 2);
  note("listed: " + items().map((li) => li.querySelector(".memory-text").textContent).join(" | "));
  items().find((li) => li.dataset.memory === "%d").querySelector("button").click();
  await until("one memory left", () => items().length === 1);
  note("left: " + items()[0].querySelector(".memory-text").textContent);
  note("done");
`, bobs.ID))
	mustContain(t, "the listed memories", logLine(t, log, "listed"), "bob fixes bikes")
	if v := logLine(t, log, "left"); v != "alice grows tomatoes" {
		t.Fatalf("left on the page: %q", v)
	}
	if ms := e.waitMemories("mem", 1); ms[0].ID != alices.ID {
		t.Fatalf("after the page: %+v", ms)
	}
}
