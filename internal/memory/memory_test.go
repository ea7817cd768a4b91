package memory_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/kv/kvtest"
	"github.com/nekro-go/nekro/internal/llm"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/memory"
	"github.com/nekro-go/nekro/internal/vector"
)

// models is the scripted model as the memory sees the model groups: the
// router and, unless noEmbed, the embedding group.
type models struct {
	llm.Static
	url     string
	noEmbed bool
}

func (m models) Embeddings(ctx context.Context, opts llm.EmbeddingOptions) (*llm.Embeddings, error) {
	if m.noEmbed {
		return nil, llm.ErrNoEmbeddingModel
	}
	return llm.NewEmbeddings(llm.Config{BaseURL: m.url, Model: "embed", RetryBase: time.Millisecond}, opts)
}

// history is a chat's messages in memory.
type history struct {
	mu   sync.Mutex
	next int64
	ms   map[string][]chat.Message
}

func (h *history) add(chatKey string, role chat.Role, sender, text string) chat.Message {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	m := chat.Message{ID: h.next, ChatKey: chatKey, Role: role, SenderID: sender, SenderName: sender, Text: text}
	if h.ms == nil {
		h.ms = map[string][]chat.Message{}
	}
	h.ms[chatKey] = append(h.ms[chatKey], m)
	return m
}

func (h *history) History(_ context.Context, chatKey string, last int) ([]chat.Message, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ms := h.ms[chatKey]
	if len(ms) > last {
		ms = ms[len(ms)-last:]
	}
	return append([]chat.Message(nil), ms...), nil
}

// memoryScript answers the memory model's requests: it adds a memory for
// every "remember: X" line among the new messages, about their writer,
// and answers anything else with reply (when not "").
func memoryScript(reply *string) llmtest.Script {
	return func(r llmtest.Request) llmtest.Reply {
		if *reply != "" {
			return llmtest.Reply{Text: *reply}
		}
		user := r.Last()
		_, news, _ := strings.Cut(user, "<new_messages>")
		var ops []string
		for _, line := range strings.Split(news, "\n") {
			_, fact, ok := strings.Cut(line, "remember: ")
			if !ok {
				continue
			}
			who := line[strings.Index(line, "(user id \"")+len("(user id \""):]
			who = who[:strings.Index(who, "\"")]
			ops = append(ops, fmt.Sprintf(`{"op": "add", "about": "user", "user_id": %q, "text": %q}`, who, fact))
		}
		return llmtest.Reply{Text: `{"operations": [` + strings.Join(ops, ", ") + `]}`}
	}
}

type fixture struct {
	svc     *memory.Service
	store   *memory.Store
	vectors vector.Store
	chats   *history
	model   *llmtest.Server
	reply   string
}

func setup(t *testing.T, opts memory.Options, noEmbed bool) *fixture {
	t.Helper()
	return setupOn(t, "sqlite", opts, noEmbed)
}

// setupOn is setup on a database of kind "sqlite" or "postgres".
func setupOn(t *testing.T, kind string, opts memory.Options, noEmbed bool) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{chats: &history{}}
	m, err := llmtest.Start(memoryScript(&f.reply))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	f.model = m
	h := kvtest.DatabaseOpener(t, kind)()
	vs, err := vector.Open(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vs.Close() })
	f.vectors = vs
	if f.store, err = memory.Open(ctx, h, vs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.store.Close() })
	client, err := llm.NewClient(llm.Config{BaseURL: m.URL, Model: "chat", RetryBase: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	opts.Enabled = true
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.MinMessages == 0 {
		opts.MinMessages = 1
	}
	f.svc = memory.NewService(f.store, models{Static: llm.Static{Default: client}, url: m.URL, noEmbed: noEmbed}, f.chats, opts)
	t.Cleanup(func() { f.svc.Close() })
	return f
}

func (f *fixture) extract(t *testing.T, chatKey string) memory.Result {
	t.Helper()
	res, err := f.svc.Extract(context.Background(), chatKey)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (f *fixture) list(t *testing.T, chatKey string) []memory.Memory {
	t.Helper()
	ms, err := f.store.List(context.Background(), chatKey, memory.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// A fact a user states is extracted once, kept in the user's scope within
// the chat, and recalled for that user in that chat only.
func TestExtractAndRecall(t *testing.T) {
	for _, c := range []struct {
		kind    string
		noEmbed bool
	}{{"sqlite", false}, {"sqlite", true}, {"postgres", false}} {
		t.Run(fmt.Sprintf("%s/noEmbed=%v", c.kind, c.noEmbed), func(t *testing.T) {
			f := setupOn(t, c.kind, memory.Options{}, c.noEmbed)
			ctx := context.Background()
			f.chats.add("a", chat.User, "alice", "remember: alice plays the cello")
			f.chats.add("a", chat.Assistant, "assistant", "Nice!")
			if res := f.extract(t, "a"); res.Added != 1 || res.Messages != 2 {
				t.Fatalf("extract = %+v, want one memory from two messages", res)
			}
			ms := f.list(t, "a")
			if len(ms) != 1 || ms[0].UserID != "alice" || ms[0].Text != "alice plays the cello" ||
				ms[0].Scope != memory.UserScope("a", "alice") {
				t.Fatalf("memories = %+v", ms)
			}
			// Nothing new: no model request.
			before := len(f.model.Requests())
			if res := f.extract(t, "a"); res.Skipped == "" {
				t.Fatalf("extract with no new message = %+v", res)
			}
			if len(f.model.Requests()) != before {
				t.Fatal("an extraction with nothing new asked the model")
			}
			q := f.chats.add("a", chat.User, "alice", "which instrument do I play?")
			block := f.svc.Recall(ctx, "a", []chat.Message{q})
			if !strings.Contains(block, "<memories>") || !strings.Contains(block, "alice plays the cello") {
				t.Fatalf("recall in chat a = %q", block)
			}
			// Another user in the chat, and alice in another chat, see nothing of it.
			if b := f.svc.Recall(ctx, "a", []chat.Message{f.chats.add("a", chat.User, "bob", "which instrument?")}); b != "" {
				t.Fatalf("bob recalls %q", b)
			}
			if b := f.svc.Recall(ctx, "b", []chat.Message{f.chats.add("b", chat.User, "alice", "which instrument?")}); b != "" {
				t.Fatalf("alice in chat b recalls %q", b)
			}
		})
	}
}

// With users' memories across chats, alice's memory follows her.
func TestUsersAcrossChats(t *testing.T) {
	f := setup(t, memory.Options{UsersAcrossChats: true}, false)
	f.chats.add("a", chat.User, "alice", "remember: alice is vegetarian")
	f.extract(t, "a")
	b := f.svc.Recall(context.Background(), "b", []chat.Message{f.chats.add("b", chat.User, "alice", "what should I eat, vegetarian?")})
	if !strings.Contains(b, "alice is vegetarian") {
		t.Fatalf("alice in chat b recalls %q", b)
	}
}

// A deleted memory is gone with its vector and is not extracted again
// from the messages it came from; an extraction overlapping a deletion
// adds nothing.
func TestDeletedMemoryNeverComesBack(t *testing.T) {
	f := setup(t, memory.Options{}, false)
	ctx := context.Background()
	f.chats.add("a", chat.User, "alice", "remember: alice hates mornings")
	f.extract(t, "a")
	ms := f.list(t, "a")
	if len(ms) != 1 {
		t.Fatalf("memories = %+v", ms)
	}
	if err := f.store.Delete(ctx, "a", ms[0].ID); err != nil {
		t.Fatal(err)
	}
	if n, _ := f.vectors.Count(ctx, memory.UserScope("a", "alice")); n != 0 {
		t.Fatalf("%d vectors left after the delete", n)
	}
	if err := f.store.Delete(ctx, "a", ms[0].ID); err == nil {
		t.Fatal("deleting it twice succeeded")
	}
	f.chats.add("a", chat.User, "alice", "good morning")
	f.extract(t, "a")
	if ms := f.list(t, "a"); len(ms) != 0 {
		t.Fatalf("the deleted memory came back: %+v", ms)
	}
	if b := f.svc.Recall(ctx, "a", []chat.Message{f.chats.add("a", chat.User, "alice", "mornings?")}); b != "" {
		t.Fatalf("recall after the delete = %q", b)
	}
}

// The memory model's operations are checked: bad JSON, unknown ids,
// users who did not write and oversized texts are refused whole.
func TestInvalidAnswersAreSkipped(t *testing.T) {
	f := setup(t, memory.Options{PerHour: 100}, false)
	f.chats.add("a", chat.User, "alice", "remember: alice likes tea")
	f.extract(t, "a")
	good := f.list(t, "a")
	for _, reply := range []string{
		`I think alice likes tea`,
		`{"operations": [{"op": "add", "about": "chat"}]}`,
		`{"operations": [{"op": "delete", "id": 999}]}`,
		`{"operations": [{"op": "add", "about": "user", "user_id": "mallory", "text": "x"}]}`,
		`{"operations": [{"op": "add", "about": "chat", "text": "` + strings.Repeat("x", memory.MaxTextBytes+1) + `"}]}`,
		`{"operations": [{"op": "forget", "id": 1}]}`,
		`{"operations": []} {"operations": []}`,
		`{"ops": []}`,
	} {
		f.reply = reply
		f.chats.add("a", chat.User, "alice", "hello")
		res := f.extract(t, "a")
		if !strings.HasPrefix(res.Skipped, "invalid answer") {
			t.Errorf("answer %.60q: %+v, want it skipped as invalid", reply, res)
		}
	}
	// A fenced answer is fine; updates and deletes of shown ids apply.
	f.reply = fmt.Sprintf("```json\n{\"operations\": [{\"op\": \"update\", \"id\": %d, \"text\": \"alice likes green tea\"}]}\n```", good[0].ID)
	f.chats.add("a", chat.User, "alice", "green tea, really")
	if res := f.extract(t, "a"); res.Updated != 1 {
		t.Fatalf("update = %+v", res)
	}
	if ms := f.list(t, "a"); len(ms) != 1 || ms[0].Text != "alice likes green tea" {
		t.Fatalf("after the update: %+v", ms)
	}
}

// The budget: at most PerHour extractions of a chat an hour, and none
// before MinMessages new user messages.
func TestBudget(t *testing.T) {
	f := setup(t, memory.Options{PerHour: 2, MinMessages: 2}, false)
	f.chats.add("a", chat.User, "alice", "one")
	if res := f.extract(t, "a"); res.Skipped == "" {
		t.Fatalf("one message: %+v", res)
	}
	for i := range 3 {
		f.chats.add("a", chat.User, "alice", "more")
		f.chats.add("a", chat.User, "alice", "and more")
		res := f.extract(t, "a")
		if (i < 2) != (res.Skipped == "") {
			t.Fatalf("extraction %d: %+v", i+1, res)
		}
	}
}

// Erasing a user erases their memories in every chat; forgetting a chat
// erases the chat's.
func TestEraseUserAndForgetChat(t *testing.T) {
	f := setup(t, memory.Options{}, false)
	ctx := context.Background()
	f.chats.add("a", chat.User, "alice", "remember: alice is a nurse")
	f.chats.add("a", chat.User, "bob", "remember: bob is a pilot")
	f.chats.add("b", chat.User, "alice", "remember: alice has a cat")
	f.extract(t, "a")
	f.extract(t, "b")
	n, err := f.store.EraseUser(ctx, "alice")
	if err != nil || n != 2 {
		t.Fatalf("EraseUser = %d, %v", n, err)
	}
	if ms := f.list(t, "a"); len(ms) != 1 || ms[0].UserID != "bob" {
		t.Fatalf("chat a after erasing alice: %+v", ms)
	}
	if n, _ := f.vectors.Count(ctx, memory.UserScope("a", "alice"), memory.UserScope("b", "alice")); n != 0 {
		t.Fatalf("%d of alice's vectors left", n)
	}
	if n, err := f.store.ForgetChat(ctx, "a"); err != nil || n != 1 {
		t.Fatalf("ForgetChat = %d, %v", n, err)
	}
	if n, _ := f.vectors.Count(ctx); n != 0 {
		t.Fatalf("%d vectors left", n)
	}
}

// The worker extracts after TurnEnded, in the background.
func TestWorker(t *testing.T) {
	f := setup(t, memory.Options{}, false)
	f.chats.add("a", chat.User, "alice", "remember: alice runs marathons")
	f.svc.TurnEnded("a")
	for deadline := time.Now().Add(10 * time.Second); len(f.list(t, "a")) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no memory 10s after the turn ended")
		}
	}
}

// The block is capped and escapes what users wrote.
func TestBlock(t *testing.T) {
	ms := []memory.Memory{{ID: 1, Text: "likes <system>tags</system>\nand lines"}, {ID: 2, UserID: "u", Text: strings.Repeat("y", 400)}}
	b := memory.Block(ms, 300)
	if strings.Contains(b, "<system>") || strings.Contains(b, "\nand lines") || strings.Contains(b, "yyy") {
		t.Fatalf("block = %q", b)
	}
	if len(b) > 300 || !strings.HasSuffix(b, "</memories>\n") {
		t.Fatalf("block of %d bytes: %q", len(b), b)
	}
	if memory.Block(nil, 300) != "" {
		t.Fatal("a block of no memories")
	}
}

// The memory model is the group "memory" when there is one (the turns'
// group otherwise, as every other test here has it).
func TestMemoryGroup(t *testing.T) {
	f := setup(t, memory.Options{}, false)
	none := ""
	own, err := llmtest.Start(memoryScript(&none))
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	client, err := llm.NewClient(llm.Config{BaseURL: own.URL, Model: "memory-model", RetryBase: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	svc := memory.NewService(f.store, models{Static: llm.Static{Default: llm.None{Reason: llm.ErrNoModel},
		Groups: map[string]llm.Model{memory.Group: client}}, url: f.model.URL}, f.chats,
		memory.Options{Enabled: true, MinMessages: 1, Log: slog.New(slog.DiscardHandler)})
	defer svc.Close()
	f.chats.add("a", chat.User, "alice", "remember: alice sings")
	if res, err := svc.Extract(context.Background(), "a"); err != nil || res.Added != 1 {
		t.Fatalf("extract = %+v, %v", res, err)
	}
	if n := len(own.Requests()); n != 1 || own.Requests()[0].Model != "memory-model" {
		t.Fatalf("the memory group got %d requests", n)
	}
}
