package qqbot

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/adapter"
)

// A message whose chat's latest user message is older than the
// platform's reply window is not sent: Send says so and the status shows
// it. Private chats get 60 minutes, groups 5, and replies to one message
// count msg_seq up from 1.
func TestReplyWindow(t *testing.T) {
	a, err := New(Config{AppID: "1", Secret: "s", APIURL: "http://127.0.0.1:1", TokenURL: "http://127.0.0.1:1/token"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a.remember("qqbot-group_G", event{kind: "GROUP_AT_MESSAGE_CREATE", m: message{ID: "g1"}, at: now.Add(-6 * time.Minute)})
	a.remember("qqbot-private_U", event{kind: "C2C_MESSAGE_CREATE", m: message{ID: "u1"}, at: now.Add(-30 * time.Minute)})

	err = a.Send(context.Background(), adapter.Outgoing{ChatKey: "qqbot-group_G", Text: "too late"})
	if !errors.Is(err, errLate) || !strings.Contains(err.Error(), "5m0s") {
		t.Fatalf("a reply 6 minutes after a group message: %v", err)
	}
	if st := a.Status()[0]; !strings.Contains(st.LastError, "qqbot-group_G") || !strings.Contains(st.LastError, "reply window") {
		t.Fatalf("status after a late reply: %+v", st)
	}
	var logged bytes.Buffer
	a.log = slog.New(slog.NewTextHandler(&logged, nil))
	for range 3 { // the delivery queue's attempts: logged once
		if err := a.Send(context.Background(), adapter.Outgoing{ChatKey: "qqbot-group_G", Text: "too late"}); !errors.Is(err, errLate) {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logged.String(), "level=ERROR"); n != 1 {
		t.Fatalf("a late reply retried is logged %d times:\n%s", n, logged.String())
	}
	if err := a.Send(context.Background(), adapter.Outgoing{ChatKey: "qqbot-private_nobody", Text: "hi"}); !errors.Is(err, errLate) {
		t.Fatalf("a message to a chat nobody wrote in: %v", err)
	}

	for want := 1; want <= 3; want++ {
		id, seq, err := a.nextReply("qqbot-private_U")
		if err != nil || id != "u1" || seq != want {
			t.Fatalf("reply %d 30 minutes after a private message: %s %d %v", want, id, seq, err)
		}
	}
	// The same message delivered again keeps its count; a new one starts over.
	a.remember("qqbot-private_U", event{kind: "C2C_MESSAGE_CREATE", m: message{ID: "u1"}, at: now})
	if _, seq, _ := a.nextReply("qqbot-private_U"); seq != 4 {
		t.Fatalf("msg_seq after a redelivery: %d, want 4", seq)
	}
	a.remember("qqbot-private_U", event{kind: "C2C_MESSAGE_CREATE", m: message{ID: "u2"}, at: now})
	if id, seq, _ := a.nextReply("qqbot-private_U"); id != "u2" || seq != 1 {
		t.Fatalf("first reply to a new message: %s %d", id, seq)
	}
}
