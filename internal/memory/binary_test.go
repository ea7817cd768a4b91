package memory_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/kv/kvtest"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/memory"
	"github.com/nekro-go/nekro/internal/testutil"
)

// binaryScript is the model of TestMemoryThroughTheBinary: the memory
// model's requests (its instructions' first words) get memoryScript's
// answers; turns get a reply in words (no code, so no sandbox run).
func binaryScript() llmtest.Script {
	none := ""
	mem := memoryScript(&none)
	return func(r llmtest.Request) llmtest.Reply {
		if len(r.Messages) > 0 && strings.HasPrefix(r.Messages[0].Content.String(), "You keep the long-term memory") {
			return mem(r)
		}
		return llmtest.Reply{Text: "Noted, thank you."}
	}
}

type served struct {
	t     *testing.T
	srv   *testutil.Served
	model *llmtest.Server
	data  string
}

// post posts alice's or bob's message and returns its id.
func (s *served) post(chatKey, user, text string) int64 {
	s.t.Helper()
	st, body := s.srv.API("POST", "/api/chats/"+chatKey+"/messages", map[string]string{"user_id": user, "user_name": user, "text": text})
	if st != http.StatusAccepted {
		s.t.Fatalf("post to %s: %d %s", chatKey, st, body)
	}
	var out struct {
		Message struct {
			ID int64 `json:"id"`
		} `json:"message"`
	}
	json.Unmarshal([]byte(body), &out)
	return out.Message.ID
}

// answered waits for the model request of a turn of chatKey answering
// message id, and returns that request's user message.
func (s *served) answered(chatKey string, id int64) string {
	s.t.Helper()
	want := fmt.Sprintf("#%d", id)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		for _, r := range s.model.RequestsFor(chatKey) {
			last := r.Last()
			if strings.Contains(last, "Answer the new message(s)") &&
				(strings.Contains(last, want+".") || strings.Contains(last, want+",")) {
				return r.Last()
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("no turn of %s answered %s after 60s:\n%s", chatKey, want, s.srv.Logs)
		}
	}
}

// memories lists chatKey's memories through the API with token.
func (s *served) memories(chatKey, token string) []memory.Memory {
	s.t.Helper()
	st, body := s.srv.Call("GET", "/api/chats/"+chatKey+"/memories", token, nil)
	if st != http.StatusOK {
		s.t.Fatalf("GET memories of %s: %d %s", chatKey, st, body)
	}
	var out struct {
		Memories []memory.Memory `json:"memories"`
		Enabled  bool            `json:"enabled"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil || !out.Enabled {
		s.t.Fatalf("GET memories: %s (%v)", body, err)
	}
	return out.Memories
}

// waitMemory waits until chatKey holds a memory containing text.
func (s *served) waitMemory(chatKey, text string) memory.Memory {
	s.t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		for _, m := range s.memories(chatKey, s.srv.Token) {
			if strings.Contains(m.Text, text) {
				return m
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("no memory %q in %s after 60s:\n%s", text, chatKey, s.srv.Logs)
		}
	}
}

// Through the real binary, with the scripted chat, memory and embeddings
// models: a fact alice states in one turn is in the memory block of a turn
// a hundred messages later in the same chat (no longer in the history the
// prompt shows), and in no other chat's prompt; a deleted memory never
// comes back; erase-user erases her memories.
func TestMemoryThroughTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts nekro")
	}
	t.Run("sqlite", func(t *testing.T) { memoryThroughTheBinary(t, "") })
	// The same on PostgreSQL, the server and the CLI sharing it.
	t.Run("postgres", func(t *testing.T) { memoryThroughTheBinary(t, kvtest.FreshSchema(t, kvtest.PostgresURL(t))) })
}

func memoryThroughTheBinary(t *testing.T, database string) {
	model, err := llmtest.Start(binaryScript())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	data := testutil.DataDir(t)
	srv := testutil.Serve(t, data, "memory-test-token-0123456789",
		"NEKRO_LLM_BASE_URL="+model.URL, "NEKRO_LLM_MODEL=chat-model", "NEKRO_LLM_API_KEY=k",
		"NEKRO_LLM_EMBEDDING_MODEL=embed-model", "NEKRO_DATABASE_URL="+database,
		"NEKRO_MEMORY=true", "NEKRO_MEMORY_MIN_MESSAGES=1", "NEKRO_MEMORY_PER_HOUR=1000")
	// The CLI's commands, on the server's data and database.
	nekro := func(args ...string) testutil.Result {
		t.Helper()
		return testutil.RunNekro(t, nil, append(args, "--data", data, "--database", database)...)
	}
	s := &served{t: t, srv: srv, model: model, data: data}

	fact := s.post("home", "alice", "remember: alice keeps bees on the roof")
	s.answered("home", fact)
	m := s.waitMemory("home", "alice keeps bees")
	if m.UserID != "alice" || m.ChatKey != "home" {
		t.Fatalf("memory = %+v", m)
	}

	// A hundred messages later (of several users), the history the prompt
	// shows no longer holds the fact; the memory block does.
	var last int64
	for i := range 100 {
		last = s.post("home", []string{"bob", "carol"}[i%2], fmt.Sprintf("chatter number %d about the weather", i))
	}
	s.answered("home", last)
	ask := s.post("home", "alice", "what do I keep on the roof, bees?")
	prompt := s.answered("home", ask)
	history, block, _ := strings.Cut(prompt, "<memories>")
	if !strings.Contains(block, "alice keeps bees on the roof") {
		t.Fatalf("the memory block of the turn 100 messages later lacks the fact:\n%s", block)
	}
	t.Logf("%d requests so far; the block a hundred messages later:\n<memories>%s", len(model.Requests()), block)
	if strings.Contains(history, "remember: alice keeps bees") {
		t.Fatal("the fact is still in the history shown: the test proves nothing")
	}
	// Not in another chat, even alice's.
	other := s.post("work", "alice", "what do I keep on the roof, bees?")
	if p := s.answered("work", other); strings.Contains(p, "<memories>") || strings.Contains(p, "bees on the roof") {
		t.Fatalf("chat work's prompt recalls chat home's memory:\n%s", p)
	}

	// The CLI lists it while the server runs.
	if r := nekro("memories", "list", "home"); r.Code != 0 ||
		!strings.Contains(r.Stdout, "alice keeps bees on the roof") {
		t.Fatalf("nekro memories list home: %d %s %s", r.Code, r.Stdout, r.Stderr)
	}

	// Deleted, it never comes back: later turns and extractions neither
	// recall nor re-learn it.
	if st, body := srv.API("DELETE", fmt.Sprintf("/api/chats/home/memories/%d", m.ID), nil); st != http.StatusNoContent {
		t.Fatalf("DELETE memory: %d %s", st, body)
	}
	for range 3 {
		s.answered("home", s.post("home", "alice", "bees again?"))
	}
	again := s.post("home", "alice", "what do I keep on the roof, bees?")
	if _, block, _ := strings.Cut(s.answered("home", again), "<memories>"); strings.Contains(block, "bees") {
		t.Fatalf("the deleted memory came back into the prompt:\n%s", block)
	}
	// Give the extraction after that turn its time, then look.
	s.answered("home", s.post("home", "bob", "remember: bob brews cider"))
	s.waitMemory("home", "bob brews cider")
	for _, m := range s.memories("home", srv.Token) {
		if strings.Contains(m.Text, "bees") {
			t.Fatalf("the deleted memory came back: %+v", m)
		}
	}

	// erase-user erases alice's memories (and only hers).
	s.answered("home", s.post("home", "alice", "remember: alice speaks Basque"))
	s.waitMemory("home", "alice speaks Basque")
	r := nekro("kv", "erase-user", "alice")
	if r.Code != 0 || !strings.Contains(r.Stdout, "memories\t1") {
		t.Fatalf("nekro kv erase-user alice: %d %q %s", r.Code, r.Stdout, r.Stderr)
	}
	ms := s.memories("home", srv.Token)
	if len(ms) != 1 || ms[0].UserID != "bob" {
		t.Fatalf("after erase-user alice: %+v", ms)
	}
	// nekro memories rm deletes one from the shell; a wrong --data is an error.
	if r := nekro("memories", "rm", "home", fmt.Sprint(ms[0].ID)); r.Code != 0 {
		t.Fatalf("nekro memories rm: %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if r := nekro("memories", "list", "home"); r.Code != 0 ||
		!strings.Contains(r.Stdout, "no memories of chat home") {
		t.Fatalf("nekro memories list after rm: %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if database == "" {
		if r := testutil.RunNekro(t, nil, "memories", "list", "home", "--data", data+"-wrong"); r.Code == 0 {
			t.Fatalf("nekro memories list with a wrong --data succeeded: %s", r.Stdout)
		}
	}
	ask = s.post("home", "alice", "which language do I speak, Basque?")
	if _, block, _ := strings.Cut(s.answered("home", ask), "<memories>"); strings.Contains(block, "Basque") {
		t.Fatalf("an erased memory is recalled:\n%s", block)
	}
}
