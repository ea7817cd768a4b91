package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/agent"
	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/plugin"
)

type execResult struct {
	StopType string `json:"stop_type"`
	Output   string `json:"output"`
	Error    string `json:"error"`
}

func (e *env) exec(chatKey, userID, code string) execResult {
	e.t.Helper()
	var res execResult
	if st := e.call("POST", "/api/chats/"+chatKey+"/exec", map[string]string{"user_id": userID, "code": code}, &res); st != http.StatusOK {
		e.t.Fatalf("exec: %d %s", st, res.Error)
	}
	return res
}

// requestBytes is the size of the texts of a model request.
func requestBytes(r llmtest.Request) int {
	n := 0
	for _, m := range r.Messages {
		n += len(m.Content.String())
	}
	return n
}

// bigResults is a plugin, enabled only in the tests that list it, whose
// methods return as many bytes as asked.
func bigResults() *plugin.Plugin {
	p := plugin.New(plugin.Meta{Name: "Big results", ModuleName: "big_results", Author: "nekro_test", Version: "0"})
	type sizeArgs struct {
		N int `json:"n" jsonschema:"bytes"`
	}
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Behavior, Name: "big_behavior", Description: "returns n bytes", Doc: "Returns n bytes.\n\nArgs:\n    n (int): how many."},
		func(ctx *plugin.Ctx, a sizeArgs) (string, error) { return strings.Repeat("B", a.N), nil })
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Agent, Name: "big_agent", Description: "returns n bytes", Doc: "Returns n bytes.\n\nArgs:\n    n (int): how many."},
		func(ctx *plugin.Ctx, a sizeArgs) (string, error) { return strings.Repeat("G", a.N), nil })
	return p
}

// The security review's repro: code sending 15 MiB messages in a loop.
// Each is refused with an error that names the limit and the size and
// reaches the code; nothing is stored, and the next turn's request stays
// small.
func TestHugeSendTextIsRefused(t *testing.T) {
	e := startEnv(t, echoScript(0), nil)
	res := e.exec("victim", "u1", `
for i in range(4):
    try:
        send_msg_text(_ck, "A" * (15 << 20))
    except Exception as e:
        print(type(e).__name__, e)`)
	if res.StopType != "NORMAL" {
		t.Fatalf("run: %+v", res)
	}
	if n := strings.Count(res.Output, "the message is 15728640 bytes, over the 64 KiB (65536 bytes) limit of a message"); n != 4 {
		t.Fatalf("%d of 4 sends refused with the limit named; output:\n%.2000s", n, res.Output)
	}
	if h := e.history("victim"); len(h) != 0 {
		t.Fatalf("%d messages stored", len(h))
	}
	e.post("victim", "u1", "Vic", "hello")
	e.waitTurns("victim", 1)
	if n := requestBytes(e.model.Requests()[0]); n > 1<<20 {
		t.Fatalf("the next turn sent %d bytes to the model", n)
	}
}

// One run stores at most 50 messages; the 51st send fails clearly, and
// the next run may send again.
func TestRunMessageBudget(t *testing.T) {
	e := startEnv(t, nil, nil)
	res := e.exec("chatty", "u1", `
sent = 0
try:
    for i in range(60):
        send_msg_text(_ck, "line %d" % i)
        sent += 1
except Exception as e:
    print("after", sent, ":", e)`)
	mustContain(t, "run output", res.Output, "after 50 : ")
	mustContain(t, "run output", res.Output, "this run already sent 50 messages, the most one run may send")
	if h := e.history("chatty"); len(h) != 50 {
		t.Fatalf("%d messages stored, want 50", len(h))
	}
	if res := e.exec("chatty", "u1", `send_msg_text(_ck, "next run")`); res.StopType != "NORMAL" {
		t.Fatalf("the next run: %+v", res)
	}
}

// Results the host records (BEHAVIOR results in the chat, AGENT results
// in the next request) are cut to the message limit with a visible note.
func TestLargeMethodResultsAreCut(t *testing.T) {
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(r.Last(), "[Agent Method Response]") {
			return llmtest.Code(`send_msg_text(_ck, "done")`)
		}
		return llmtest.Code(`big_agent(5 << 20)`)
	}, func(o *serveOptions) {
		o.App.Host.Plugins = append(pluginhost.Registered(), bigResults())
	})
	res := e.exec("c-big", "", `big_behavior(5 << 20)`)
	if res.StopType != "NORMAL" {
		t.Fatalf("run: %+v", res)
	}
	h := e.history("c-big")
	if len(h) != 1 || h[0].Role != chat.System || len(h[0].Text) > chat.MaxTextBytes {
		t.Fatalf("history: %d messages, first %d bytes", len(h), len(h[0].Text))
	}
	mustContain(t, "recorded BEHAVIOR result", h[0].Text, "[nekro: cut here: the text was 5242880 bytes, over the 64 KiB limit of a message]")

	e.post("c-big", "u1", "Bo", "go")
	turns := e.waitTurns("c-big", 1)
	if turns[0].Status != chat.TurnDone {
		t.Fatalf("turn: %+v", turns[0])
	}
	reqs := e.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	mustContain(t, "agent feedback", reqs[1].Last(), "[nekro: cut here: the text was 5242880 bytes")
	if n := requestBytes(reqs[1]); n > agent.MaxPromptHistoryBytes+3*chat.MaxTextBytes+64<<10 {
		t.Fatalf("the request after a 5 MiB agent result is %d bytes", n)
	}
	for _, m := range e.history("c-big") {
		if len(m.Text) > chat.MaxTextBytes {
			t.Fatalf("a %d-byte message was stored", len(m.Text))
		}
	}
}

// A turn answering one user runs as that user and reads their data; a
// turn answering two users runs as neither, so code answering one cannot
// read the other's private data.
func TestMixedSenderTurnRunsWithoutUser(t *testing.T) {
	const read = `
try:
    send_msg_text(_ck, "got " + get_preference("theme"))
except Exception as e:
    send_msg_text(_ck, "error " + str(e))`
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply {
		var reply llmtest.Reply
		switch texts := answeredTexts(r); {
		case len(texts) == 1 && texts[0] == "save":
			reply = llmtest.Code(`send_msg_text(_ck, save_preference("theme", "dark"))`)
		case len(texts) == 1 && texts[0] == "hold":
			reply = llmtest.Code(`send_msg_text(_ck, "held")`)
			reply.Delay = 500 * time.Millisecond
		default:
			reply = llmtest.Code(read)
		}
		return reply
	}, func(o *serveOptions) { o.App.Enable = []string{"nekro_examples.kvstore"} })
	last := func() string {
		h := e.history("group")
		return h[len(h)-1].Text
	}
	// Alice saves, and reads her own preferences back in a turn of hers.
	e.post("group", "alice", "Alice", "save")
	e.waitTurns("group", 1)
	e.post("group", "alice", "Alice", "read")
	e.waitTurns("group", 2)
	if got := last(); got != "got 偏好: {'theme': 'dark', 'notifications': True}" {
		t.Fatalf("single-sender turn read %q", got)
	}
	// Bob saves too.
	e.post("group", "bob", "Bob", "save")
	e.waitTurns("group", 3)

	// While a turn of Alice's runs, both write; the next turn answers both.
	e.post("group", "alice", "Alice", "hold")
	time.Sleep(150 * time.Millisecond)
	e.post("group", "bob", "Bob", "read")
	e.post("group", "alice", "Alice", "read")
	turns := e.waitTurns("group", 5)
	if len(turns) != 5 {
		t.Fatalf("%d turns: %+v", len(turns), turns)
	}
	got := last()
	if strings.Contains(got, "dark") || !strings.Contains(got, "error ") || !strings.Contains(got, "without a user") {
		t.Fatalf("mixed-sender turn read %q, want a no-user error", got)
	}
	reqs := e.model.Requests()
	mustContain(t, "mixed-sender prompt", reqs[len(reqs)-1].Last(), "These messages come from 2 different users, so your script runs for no user")
}

// answeredTexts returns the texts of the messages the request answers.
func answeredTexts(r llmtest.Request) []string {
	var out []string
	hist := r.Messages[1].Content.String()
	for _, id := range strings.Split(answering(r), ", ") {
		for _, line := range strings.Split(hist, "\n") {
			if strings.HasPrefix(line, "["+id+" ") {
				_, text, _ := strings.Cut(line, "): ")
				out = append(out, text)
			}
		}
	}
	return out
}
