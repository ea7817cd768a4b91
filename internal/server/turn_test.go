package server_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image/png"
	"net/http"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

// A TOOL call is used inside the code: its result reaches the code, not
// the model, and the turn ends after one request.
func TestTurnToolCallUsedInCode(t *testing.T) {
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply {
		return llmtest.Code(`
total = my_sum_function(20, 22)
send_msg_text(_ck, f"20 + 22 = {total}")`)
	}, nil)
	e.post("c-tool", "u1", "Alice", "what is 20 + 22?")
	turns := e.waitTurns("c-tool", 1)

	reqs := e.model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("model got %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Model != "scripted-model" || r.Auth != "Bearer model-key" {
		t.Errorf("request model %q auth %q", r.Model, r.Auth)
	}
	if r.Messages[0].Role != "system" {
		t.Fatalf("first message is %q, want the system prompt", r.Messages[0].Role)
	}
	sys := r.Messages[0].Content.String()
	mustContain(t, "system prompt", sys, "my_sum_function(num1: int, num2: int) -> int")
	mustContain(t, "system prompt", sys, "search_kb(query: str) -> str - **[AGENT METHOD - STOP AFTER CALL]**")
	mustContain(t, "system prompt", sys, "send_msg_text(chat_key: str, message_text: str)")
	mustContain(t, "system prompt", sys, "./uploads (/app/uploads) is read-only")
	hist := r.Last()
	mustContain(t, "history prompt", hist, `"Alice" (user id u1): what is 20 + 22?`)

	got := texts(e.history("c-tool"))
	want := []string{"user: what is 20 + 22?", "assistant: 20 + 22 = 42"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("history:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if turns[0].Status != chat.TurnDone || turns[0].Iterations != 1 || turns[0].Requests != 1 {
		t.Errorf("turn %+v, want done after 1 run and 1 request", turns[0])
	}
	runs := e.runs("c-tool")
	if len(runs) != 1 || runs[0].StopType != "NORMAL" || !strings.Contains(string(runs[0].Calls), `"my_sum_function"`) {
		t.Fatalf("runs: %+v", runs)
	}
	mustContain(t, "recorded code", runs[0].Code, "my_sum_function(20, 22)")
}

// An AGENT method ends the run; its result goes back to the model in a
// second request, and the code after the call never runs.
func TestTurnAgentMethodAsksAgain(t *testing.T) {
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(r.Last(), "[Agent Method Response]") {
			return llmtest.Code(`send_msg_text(_ck, "the sandbox has no network")`)
		}
		return llmtest.Code(`
search_kb("sandbox network")
send_msg_text(_ck, "this line must never run")`)
	}, nil)
	e.post("c-agent", "u1", "Bob", "does the sandbox have network?")
	turns := e.waitTurns("c-agent", 1)

	reqs := e.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model got %d requests, want 2", len(reqs))
	}
	second := reqs[1]
	last := second.Last()
	mustContain(t, "second request", last, "[Agent Method Response] search_kb returned:")
	mustContain(t, "second request", last, "AI code runs in a bubblewrap sandbox: no network")
	// The second request repeats the first and adds the model's own reply.
	if n := len(second.Messages); n != 4 || second.Messages[2].Role != "assistant" {
		t.Fatalf("second request has %d messages (roles %v), want system, user, assistant, user", n, roles(second))
	}
	mustContain(t, "echoed reply", second.Messages[2].Content.String(), `search_kb("sandbox network")`)

	for _, line := range texts(e.history("c-agent")) {
		if strings.Contains(line, "must never run") {
			t.Fatalf("code after the agent method ran: %s", line)
		}
	}
	h := texts(e.history("c-agent"))
	if h[len(h)-1] != "assistant: the sandbox has no network" {
		t.Fatalf("history: %q", h)
	}
	runs := e.runs("c-agent")
	if len(runs) != 2 || runs[0].StopType != "AGENT" || runs[0].AgentMethod != "search_kb" || runs[1].StopType != "NORMAL" {
		t.Fatalf("runs: %+v", runs)
	}
	if turns[0].Iterations != 2 || turns[0].Requests != 2 {
		t.Errorf("turn: %+v", turns[0])
	}
}

func roles(r llmtest.Request) []string {
	var out []string
	for _, m := range r.Messages {
		out = append(out, m.Role)
	}
	return out
}

// A BEHAVIOR result is recorded as a system message while the code runs,
// with no extra request; the next turn's prompt shows it.
func TestTurnBehaviorRecordedAsSystemMessage(t *testing.T) {
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(r.Last(), "second question") {
			return llmtest.Code(`send_msg_text(_ck, "noted")`)
		}
		return llmtest.Code(`
status = send_chat_message("hello there")
assert "已成功发送" in status, status`)
	}, nil)
	e.post("c-behavior", "u1", "Carol", "say hello")
	e.waitTurns("c-behavior", 1)
	if n := len(e.model.Requests()); n != 1 {
		t.Fatalf("a BEHAVIOR call caused %d requests, want 1", n)
	}
	got := strings.Join(texts(e.history("c-behavior")), "\n")
	want := "user: say hello\nassistant: hello there\nsystem: 消息 'hello there...' 已成功发送。"
	if got != want {
		t.Fatalf("history:\n%s\nwant:\n%s", got, want)
	}

	e.post("c-behavior", "u1", "Carol", "second question")
	e.waitTurns("c-behavior", 2)
	reqs := e.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model got %d requests after two turns, want 2", len(reqs))
	}
	mustContain(t, "second turn's history", reqs[1].Last(), "SYSTEM: 消息 'hello there...' 已成功发送。")
	// Stable parts first: the system prompt is byte-identical and the
	// history only grows at its end, so a prompt cache keeps the prefix.
	if reqs[0].Messages[0].Content.Text != reqs[1].Messages[0].Content.Text {
		t.Fatal("the system prompt changed between turns")
	}
	firstHistory, _, _ := strings.Cut(reqs[0].Last(), "</chat_history>")
	if !strings.HasPrefix(reqs[1].Last(), firstHistory) {
		t.Fatalf("the second turn's history does not extend the first:\n%s\n---\n%s", reqs[0].Last(), reqs[1].Last())
	}
	mustContain(t, "second turn's history", reqs[1].Last(), "you (assistant): hello there")
}

// A MULTIMODAL_AGENT result arrives in the next request as content parts,
// the image as an image_url part.
func TestTurnMultimodalAgentSendsImage(t *testing.T) {
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply {
		if len(r.ImageURLs()) > 0 {
			return llmtest.Code(`send_msg_text(_ck, "what a sunset")`)
		}
		return llmtest.Code(`generate_image_with_comment("sunset")`)
	}, nil)
	e.post("c-mm", "u1", "Dan", "draw a sunset")
	e.waitTurns("c-mm", 1)

	reqs := e.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model got %d requests, want 2", len(reqs))
	}
	if n := len(reqs[0].ImageURLs()); n != 0 {
		t.Fatalf("first request already has %d images", n)
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if last.Role != "user" || last.Content.Parts == nil {
		t.Fatalf("last message of the second request is %q with text content %q, want multimodal user content", last.Role, last.Content.Text)
	}
	var image, comment bool
	for _, p := range last.Content.Parts {
		switch {
		case p.Type == "image_url":
			b64, ok := strings.CutPrefix(p.ImageURL.URL, "data:image/png;base64,")
			if !ok {
				t.Fatalf("image url %.40q is not a PNG data URL", p.ImageURL.URL)
			}
			raw, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(bytes.NewReader(raw))
			if err != nil {
				t.Fatalf("image does not decode: %v", err)
			}
			if img.Bounds().Dx() != 64 {
				t.Errorf("image is %v", img.Bounds())
			}
			image = true
		case p.Type == "text" && strings.Contains(p.Text, "这是一张关于 'sunset' 的图片。"):
			comment = true
		}
	}
	if !image || !comment {
		t.Fatalf("second request's parts: image %v, comment %v", image, comment)
	}
	h := texts(e.history("c-mm"))
	if h[len(h)-1] != "assistant: what a sunset" {
		t.Fatalf("history: %q", h)
	}
	if runs := e.runs("c-mm"); runs[0].StopType != "MULTIMODAL_AGENT" {
		t.Fatalf("first run stopped with %s", runs[0].StopType)
	}
}

// A failing run goes back to the model with its traceback, and the fixed
// script runs.
func TestTurnErrorRetriedWithTraceback(t *testing.T) {
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(r.Last(), "[Sandbox Output]") {
			return llmtest.Code(`send_msg_text(_ck, "fixed: " + str(10 // 2))`)
		}
		return llmtest.Code(`
ratio = 10 / 0
send_msg_text(_ck, str(ratio))`)
	}, nil)
	e.post("c-err", "u1", "Eve", "divide")
	turns := e.waitTurns("c-err", 1)

	reqs := e.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model got %d requests, want 2", len(reqs))
	}
	fb := reqs[1].Last()
	mustContain(t, "retry request", fb, "Traceback (most recent call last):")
	mustContain(t, "retry request", fb, `File "main.py", line 1`)
	mustContain(t, "retry request", fb, "ZeroDivisionError: division by zero")
	mustContain(t, "retry request", fb, "attempt 1 of 3")
	h := texts(e.history("c-err"))
	if h[len(h)-1] != "assistant: fixed: 5" {
		t.Fatalf("history: %q", h)
	}
	runs := e.runs("c-err")
	if len(runs) != 2 || runs[0].StopType != "ERROR" || runs[1].StopType != "NORMAL" {
		t.Fatalf("runs: %+v", runs)
	}
	if turns[0].Status != chat.TurnDone {
		t.Fatalf("turn: %+v", turns[0])
	}
}

// Every reply that is requested is run: N requests, N runs, and the turn
// gives up with a message in the chat.
func TestTurnGivesUpAfterMaxIterations(t *testing.T) {
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply {
		return llmtest.Code(`raise RuntimeError("still broken")`)
	}, func(o *serveOptions) { o.App.Agent.MaxIterations = 2 })
	e.post("c-max", "u1", "Fay", "try")
	turns := e.waitTurns("c-max", 1)
	if n := len(e.model.Requests()); n != 2 {
		t.Fatalf("model got %d requests, want 2 (one per run)", n)
	}
	if n := len(e.runs("c-max")); n != 2 {
		t.Fatalf("%d runs, want 2", n)
	}
	if turns[0].Status != chat.TurnFailed || !strings.Contains(turns[0].Error, "gave up after 2 runs") {
		t.Fatalf("turn: %+v", turns[0])
	}
	// The note for the model and the operator, then one message for the
	// chat's people, without internals.
	h := texts(e.history("c-max"))
	mustContain(t, "history", h[len(h)-2], "system: nekro: gave up after 2 runs; the last ended with ERROR")
	mustContain(t, "history", h[len(h)-1], "assistant: Sorry, I could not answer this time.")
}

// send_msg_text to another chat is refused: nothing lands there, and the
// model is told why.
func TestTurnSendToOtherChatRefused(t *testing.T) {
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(r.Last(), "is not this chat") {
			return llmtest.Code(`send_msg_text(_ck, "sorry, only here")`)
		}
		return llmtest.Code(`send_msg_text("c-victim", "hello from another chat")`)
	}, nil)
	e.post("c-attacker", "u1", "Gus", "write to the other chat")
	e.waitTurns("c-attacker", 1)
	if h := e.history("c-victim"); len(h) != 0 {
		t.Fatalf("the other chat got messages: %q", texts(h))
	}
	reqs := e.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model got %d requests, want 2", len(reqs))
	}
	mustContain(t, "retry request", reqs[1].Last(), `chat_key "c-victim" is not this chat: code may only send to its own chat, so pass _ck`)
	h := texts(e.history("c-attacker"))
	if h[len(h)-1] != "assistant: sorry, only here" {
		t.Fatalf("history: %q", h)
	}
}

// A file written in the sandbox is sent as an attachment that the next
// run reads from /app/uploads.
func TestTurnSendsFile(t *testing.T) {
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply {
		return llmtest.Code(`
with open("/app/shared/report.txt", "w") as f:
    f.write("all good")
send_msg_file(_ck, "/app/shared/report.txt")`)
	}, nil)
	e.post("c-file", "u1", "Hal", "send me a report")
	e.waitTurns("c-file", 1)
	h := e.history("c-file")
	last := h[len(h)-1]
	if len(last.Attachments) != 1 || last.Attachments[0].Path != "/app/uploads/report.txt" || last.Attachments[0].Kind != "file" {
		t.Fatalf("last message: %+v", last)
	}
	var res struct {
		StopType string `json:"stop_type"`
		Output   string `json:"output"`
	}
	e.call("POST", "/api/chats/c-file/exec", map[string]string{"code": `print(open("/app/uploads/report.txt").read())`}, &res)
	if res.StopType != "NORMAL" || res.Output != "all good\n" {
		t.Fatalf("reading the attachment back: %+v", res)
	}
}

// A reply that is words, not code, reaches the chat as the assistant's
// message and nothing runs; an unfenced reply that is Python still runs.
func TestProseReplyIsTheAssistantsMessage(t *testing.T) {
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply {
		if r.Contains("code please") {
			return llmtest.Reply{Text: "send_msg_text(_ck, \"from unfenced code\")"}
		}
		return llmtest.Reply{Text: "Hello! I am here. What shall we do today?"}
	}, nil)
	e.post("p1", "u1", "Ann", "hi")
	turns := e.waitTurns("p1", 1)
	h := e.history("p1")
	last := h[len(h)-1]
	if turns[0].Status != "done" || last.Role != "assistant" || last.Text != "Hello! I am here. What shall we do today?" {
		t.Errorf("turn %+v, last message %+v", turns[0], last)
	}
	if runs := e.runs("p1"); len(runs) != 0 || len(e.model.RequestsFor("p1")) != 1 {
		t.Errorf("a prose reply ran as code: %d runs, %d requests", len(runs), len(e.model.RequestsFor("p1")))
	}
	e.post("p2", "u1", "Ann", "code please")
	e.waitTurns("p2", 1)
	h = e.history("p2")
	if last := h[len(h)-1]; last.Text != "from unfenced code" || len(e.runs("p2")) != 1 {
		t.Errorf("unfenced code did not run: %+v", h)
	}
}

// The chat list: the chats with messages, most recently active first,
// with their last message and turn state, paged; `nekro chats list`
// prints the same.
func TestChatList(t *testing.T) {
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply { return llmtest.Code(`send_msg_text(_ck, "answered")`) }, nil)
	for _, c := range []string{"first", "second", "third"} {
		e.post(c, "u1", "Ann", "hello "+c)
		e.waitTurns(c, 1)
	}
	e.call("POST", "/api/chats/first/exec", map[string]string{"code": `send_msg_text(_ck, "latest news")`}, nil)
	type list struct {
		Chats []struct {
			ChatKey     string `json:"chat_key"`
			TurnState   string `json:"turn_state"`
			LastMessage struct {
				ID   int64
				Text string
			} `json:"last_message"`
		}
	}
	var l list
	if st := e.call("GET", "/api/chats?limit=2", nil, &l); st != http.StatusOK || len(l.Chats) != 2 {
		t.Fatalf("GET /api/chats: %d %+v", st, l)
	}
	if c := l.Chats[0]; c.ChatKey != "first" || c.LastMessage.Text != "latest news" || c.TurnState != "done" || l.Chats[1].ChatKey != "third" {
		t.Errorf("page 1: %+v", l.Chats)
	}
	var next list
	e.call("GET", fmt.Sprintf("/api/chats?limit=2&before=%d", l.Chats[1].LastMessage.ID), nil, &next)
	if len(next.Chats) != 1 || next.Chats[0].ChatKey != "second" || next.Chats[0].LastMessage.Text != "answered" {
		t.Errorf("page 2: %+v", next.Chats)
	}
	if st := e.call("GET", "/api/chats?limit=0", nil, nil); st != http.StatusBadRequest {
		t.Errorf("limit=0: %d", st)
	}
	e.stop()
	r := testutil.RunNekro(t, nil, "--data", e.dataDir, "chats", "list")
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if r.Code != 0 || len(lines) != 4 || !strings.HasPrefix(lines[1], "first ") || !strings.Contains(lines[1], "assistant: latest news") {
		t.Errorf("chats list: %+v", r)
	}
}
