package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

// `nekro chats reset` clears the history as the API's reset does, not
// only the plugins' hooks.
func TestChatsResetClearsHistory(t *testing.T) {
	data := testutil.DataDir(t)
	ctx := context.Background()
	a, err := app.Open(ctx, app.Config{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	chats := a.Chats
	for _, c := range []string{"group_1", "group_2"} {
		if _, err := chats.AddMessage(ctx, chat.Message{ChatKey: c, Role: chat.User, SenderID: "u", Text: "hello " + c}); err != nil {
			t.Fatal(err)
		}
	}
	a.Close(ctx)

	r := testutil.RunNekro(t, nil, "--data", data, "chats", "reset", "group_1")
	if r.Code != 0 || !strings.Contains(r.Stdout, "1 messages deleted") {
		t.Fatalf("reset: %+v", r)
	}

	a, err = app.Open(ctx, app.Config{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	chats = a.Chats
	h1, _ := chats.History(ctx, "group_1", 0)
	h2, _ := chats.History(ctx, "group_2", 0)
	if len(h1) != 0 || len(h2) != 1 {
		t.Errorf("after reset: group_1 has %d messages (want 0), group_2 %d (want 1)", len(h1), len(h2))
	}
}

// Code run by `nekro exec` is recorded as a turn's and the playground's
// runs are: the run with its code and calls, and a BEHAVIOR result as a
// system message in the chat.
func TestExecRecordsTheRunLikeATurn(t *testing.T) {
	data := testutil.DataDir(t)
	r := testutil.RunNekroExamples(t, []byte(`print(send_chat_message("hello from exec"))`),
		"--data", data, "exec", "--chat", "group_9", "--user", "u1", "-")
	if r.Code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	ctx := context.Background()
	a, err := app.Open(ctx, app.Config{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	runs, err := a.Chats.Runs(ctx, "group_9")
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs of group_9: %d, %v; want the exec run", len(runs), err)
	}
	if !strings.Contains(runs[0].Code, "hello from exec") || !strings.Contains(string(runs[0].Calls), "send_chat_message") {
		t.Errorf("the recorded run: code %q, calls %s", runs[0].Code, runs[0].Calls)
	}
	h, _ := a.Chats.History(ctx, "group_9", 0)
	var system []string
	for _, m := range h {
		if m.Role == chat.System {
			system = append(system, m.Text)
		}
	}
	if len(system) != 1 || !strings.Contains(system[0], "hello from exec") {
		t.Errorf("want the BEHAVIOR result as one system message; history: %+v", h)
	}
}

// `nekro chats send --file` stores a message with its files without a
// server (saying it waits for one), `chats prompt` shows the file's
// sandbox path, the next nekro serve answers it, and a message sent while
// that server runs is answered too (the server polls the database for
// messages other processes stored); the turn's code reads the file.
func TestChatsSendWithFiles(t *testing.T) {
	data := testutil.DataDir(t)
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notes, []byte("buy milk"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := testutil.RunNekro(t, nil, "--data", data, "chats", "send", "shell", "--user", "u1", "--user-name", "Ann",
		"--file", notes, "what", "is", "in", "my", "notes?")
	if r.Code != 0 || !strings.Contains(r.Stdout, "file /app/uploads/notes.txt (text/plain; charset=utf-8, 8 bytes)") ||
		!strings.Contains(r.Stdout, "a nekro serve on this data directory answers it within a second") {
		t.Fatalf("send: %+v", r)
	}
	p := testutil.RunNekro(t, nil, "--data", data, "chats", "prompt", "shell")
	if p.Code != 0 || !strings.Contains(p.Stdout, `"Ann" (user id u1): what is in my notes?`) ||
		!strings.Contains(p.Stdout, "[file attachment: /app/uploads/notes.txt") || !strings.Contains(p.Stdout, "Answer the new message(s)") {
		t.Fatalf("prompt: %+v", p)
	}
	// Refused: no text and no file; a missing file; over the file limit.
	for _, args := range [][]string{
		{"chats", "send", "shell", "--user", "u1"},
		{"chats", "send", "shell", "--user", "u1", "--file", filepath.Join(dir, "missing")},
		{"chats", "send", "shell", "--user", "u1", "--upload-max-file", "4B", "--file", notes},
	} {
		if r := testutil.RunNekro(t, nil, append([]string{"--data", data}, args...)...); r.Code == 0 {
			t.Fatalf("%v accepted: %+v", args, r)
		}
	}

	model, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		again := ""
		if strings.Contains(r.Last(), "again please") {
			again = " (again)" // nekro.basic skips a message identical to a recent one
		}
		return llmtest.Code(`send_msg_text(_ck, "your notes: " + open("/app/uploads/notes.txt").read() + "` + again + `")`)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	s := testutil.Serve(t, data, "tok-send", "NEKRO_LLM_BASE_URL="+model.URL, "NEKRO_LLM_MODEL=scripted")
	answers := func() int {
		_, body := s.API("GET", "/api/chats/shell/messages", nil)
		return strings.Count(body, "your notes: buy milk")
	}
	waitFor := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); answers() < n; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				_, body := s.API("GET", "/api/chats/shell/messages", nil)
				t.Fatalf("%d answers, want %d:\n%s\n%s", answers(), n, body, s.Logs)
			}
		}
	}
	waitFor(1) // waiting when the server started
	r = testutil.RunNekro(t, nil, "--data", data, "chats", "send", "shell", "--user", "u1", "again please")
	if r.Code != 0 {
		t.Fatalf("send while serving: %+v", r)
	}
	waitFor(2) // stored by another process while the server ran
	if n := len(model.RequestsFor("shell")); n != 2 {
		t.Errorf("%d model requests for 2 messages", n)
	}
}
