package cli_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/testutil"
)

// `nekro chats reset` clears the history as the API's reset does, not
// only the plugins' hooks.
func TestChatsResetClearsHistory(t *testing.T) {
	data := testutil.DataDir(t)
	ctx := context.Background()
	rt, err := runtime.Open(ctx, runtime.Config{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	chats, err := chat.Open(ctx, rt.Database(), rt.Layout(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"group_1", "group_2"} {
		if _, err := chats.AddMessage(ctx, chat.Message{ChatKey: c, Role: chat.User, SenderID: "u", Text: "hello " + c}); err != nil {
			t.Fatal(err)
		}
	}
	chats.Close()
	rt.Close(ctx)

	r := testutil.RunNekro(t, nil, "--data", data, "chats", "reset", "group_1")
	if r.Code != 0 || !strings.Contains(r.Stdout, "1 messages deleted") {
		t.Fatalf("reset: %+v", r)
	}

	rt, err = runtime.Open(ctx, runtime.Config{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	chats, err = chat.Open(ctx, rt.Database(), rt.Layout(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer chats.Close()
	h1, _ := chats.History(ctx, "group_1", 0)
	h2, _ := chats.History(ctx, "group_2", 0)
	if len(h1) != 0 || len(h2) != 1 {
		t.Errorf("after reset: group_1 has %d messages (want 0), group_2 %d (want 1)", len(h1), len(h2))
	}
}
