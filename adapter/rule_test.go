package adapter_test

import (
	"flag"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/adapter"
)

func TestReplyRule(t *testing.T) {
	r := adapter.ReplyRule{Names: []string{"Nekko"}, Groups: []string{"100"}}
	for _, c := range []struct {
		name string
		e    adapter.Event
		want bool
	}{
		{"private", adapter.Event{Private: true, Text: "hi"}, true},
		{"own message", adapter.Event{Private: true, FromSelf: true, Text: "hi"}, false},
		{"mentioned", adapter.Event{Group: "100", Mention: true}, true},
		{"named, any case", adapter.Event{Group: "100", Text: "hey nekko, look"}, true},
		{"platform nickname", adapter.Event{Group: "100", Text: "Bot-chan?", BotNames: []string{"bot-chan"}}, true},
		{"not addressed", adapter.Event{Group: "100", Text: "just talking"}, false},
		{"group not allowed", adapter.Event{Group: "200", Mention: true}, false},
	} {
		if got := r.Answer(c.e); got != c.want {
			t.Errorf("%s: Answer = %v, want %v", c.name, got, c.want)
		}
	}
	if !(adapter.ReplyRule{Probability: 1}).Answer(adapter.Event{Group: "1", Text: "x"}) {
		t.Error("probability 1 did not answer")
	}
	if p, c, ok := adapter.SplitChatKey("onebot_v11-group_123"); !ok || p != "onebot_v11" || c != "group_123" {
		t.Errorf("SplitChatKey: %q %q %v", p, c, ok)
	}
	if _, _, ok := adapter.SplitChatKey("demo"); ok {
		t.Error("a chat key without a platform split")
	}
}

func TestListFlag(t *testing.T) {
	t.Setenv("NEKRO_TEST_LIST", " a, ,b ")
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var got []string
	adapter.ListFlag(fs, &got, "list", "NEKRO_TEST_LIST", "items")
	if strings.Join(got, "|") != "a|b" {
		t.Fatalf("from the environment: %q", got)
	}
	if err := fs.Parse([]string{"--list", "x,y"}); err != nil || strings.Join(got, "|") != "x|y" {
		t.Fatalf("from the flag: %q %v", got, err)
	}
	if !strings.Contains(fs.Lookup("list").Usage, "(env NEKRO_TEST_LIST)") {
		t.Fatalf("usage %q does not name the variable", fs.Lookup("list").Usage)
	}
}
