package cli_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/chat"
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
	r := testutil.RunNekro(t, []byte(`print(send_chat_message("hello from exec"))`),
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
