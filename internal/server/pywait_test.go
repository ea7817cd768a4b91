package server_test

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
)

// A Python plugin's command asks its sender (the reference's
// CmdCtl.wait): the question and its options are the answer; the
// sender's next message in that chat, not a command, runs the callback
// command with the question's context data, and no model answers it;
// another user's message, or the same user's in another chat, is not the
// answer; a command meanwhile cancels the question; an unanswered one
// times out with its message.
func TestPythonCommandWaitsForTheSender(t *testing.T) {
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "the model answered"} },
		func(o *serveOptions) {
			o.App.PluginDirs = []string{filepath.Join("..", "pyplugin", "testdata", "waitcmds")}
		})
	post := func(chatKey, user, text string) {
		t.Helper()
		var out struct{ Error string }
		if st := e.call("POST", "/api/chats/"+chatKey+"/messages",
			map[string]string{"user_id": user, "user_name": "Ann " + user, "text": text}, &out); st != http.StatusAccepted {
			t.Fatalf("%s: %d %s", text, st, out.Error)
		}
	}
	last := func(chatKey string) string {
		h := e.history(chatKey)
		return h[len(h)-1].Text
	}
	const g = "onebot_v11-group_7"
	post(g, "u1", "/ask")
	if got, want := last(g), "let me ask\nWhich colour, Ann u1?\nOptions: red / blue"; got != want {
		t.Fatalf("the question: %q, want %q", got, want)
	}
	post(g, "u1", "blue")
	if got, want := last(g), "u1 chose blue (asked u1)"; got != want {
		t.Fatalf("the answer: %q, want %q", got, want)
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Fatalf("the answer to the question went to the model (%d requests)", n)
	}
	// Answered once: the next message is an ordinary one again.
	post(g, "u1", "red")
	waitModel(t, e, 1)

	// A command meanwhile cancels the question.
	post(g, "u1", "/ask")
	post(g, "u1", "/help")
	post(g, "u1", "red")
	waitModel(t, e, 2)

	// Another user's answer, or one in another chat, is not the answer.
	post(g, "u1", "/ask")
	post(g, "u2", "red")
	waitModel(t, e, 3)
	post("onebot_v11-group_8", "u1", "red")
	waitModel(t, e, 4)
	post(g, "u1", "red")
	if got, want := last(g), "u1 chose red (asked u1)"; got != want {
		t.Fatalf("the asker's answer after the others: %q, want %q", got, want)
	}

	// Not answered in time: the question goes, saying so.
	post(g, "u1", "/quick")
	if got := last(g); got != "Quick, yes or no?" {
		t.Fatalf("the quick question: %q", got)
	}
	for deadline := time.Now().Add(20 * time.Second); last(g) != "too slow"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no timeout message: %q", last(g))
		}
	}
	post(g, "u1", "yes")
	waitModel(t, e, 5)
}

// waitModel waits until the model has had n requests.
func waitModel(t *testing.T, e *env, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); len(e.model.Requests()) < n; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the model had %d requests, want %d", len(e.model.Requests()), n)
		}
	}
	if got := len(e.model.Requests()); got != n {
		t.Fatalf("the model had %d requests, want %d", got, n)
	}
}

// A Python plugin's command answers with image and file segments: they
// are posted with its text as the answer's attachments, in the chat's
// uploads; a segment whose file cannot be read is named in the text.
func TestPythonCommandAnswersWithFiles(t *testing.T) {
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "the model answered"} },
		func(o *serveOptions) {
			o.App.PluginDirs = []string{filepath.Join("..", "pyplugin", "testdata", "waitcmds")}
		})
	const g = "onebot_v11-group_7"
	var out struct{ Error string }
	if st := e.call("POST", "/api/chats/"+g+"/messages", map[string]string{"user_id": "u1", "text": "/chart"}, &out); st != http.StatusAccepted {
		t.Fatalf("/chart: %d %s", st, out.Error)
	}
	h := e.history(g)
	last := h[len(h)-1]
	if last.Text != "here is the chart\n[file gone.txt]" {
		t.Errorf("text: %q", last.Text)
	}
	if len(last.Attachments) != 2 || last.Attachments[0].Name != "dot.png" || last.Attachments[0].Kind != "image" ||
		last.Attachments[1].Name != "report.csv" || last.Attachments[1].Kind != "file" || last.Attachments[1].Size != int64(len("day,cups\nmon,3\n")) {
		t.Fatalf("attachments: %+v", last.Attachments)
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Errorf("the command made %d model requests", n)
	}
}
