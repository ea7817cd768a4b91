package adapter_test

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/nekro-go/nekro/adapter"
)

// Chat keys and user ids carry the platform, as the reference writes
// them, so a platform's user never passes for an API user.
func ExampleChatKey() {
	fmt.Println(adapter.ChatKey("onebot_v11", "group_123"))
	fmt.Println(adapter.UserID("onebot_v11", "10001"))
	fmt.Println(adapter.SplitChatKey("onebot_v11-private_10001"))
	// Output:
	// onebot_v11-group_123
	// onebot_v11:10001
	// onebot_v11 private_10001 true
}

// ReplyRule decides when the bot answers: always in private chats; in a
// group when mentioned, named, or by chance; never to itself.
func ExampleReplyRule() {
	rule := adapter.ReplyRule{Names: []string{"Nekko"}, Groups: []string{"123"}}
	fmt.Println(rule.Answer(adapter.Event{Private: true, Text: "hi"}))
	fmt.Println(rule.Answer(adapter.Event{Group: "123", Text: "nekko, what time is it?"}))
	fmt.Println(rule.Answer(adapter.Event{Group: "123", Text: "lunch?"}))
	fmt.Println(rule.Answer(adapter.Event{Group: "456", Mention: true}))
	fmt.Println(rule.Answer(adapter.Event{Private: true, FromSelf: true}))
	// Output:
	// true
	// true
	// false
	// false
	// false
}

// room is a platform adapter: Info, Run, Send and Status.
type room struct{ token string }

func (r *room) Info() adapter.Info { return adapter.Info{Platform: "room", Settings: "token set"} }

func (r *room) Run(ctx context.Context, h adapter.Host) error {
	// Connect, then hand each message to nekro until ctx ends:
	// h.Receive(ctx, adapter.Message{ChatKey: adapter.ChatKey("room", "lobby"), ...})
	<-ctx.Done()
	return nil
}

func (r *room) Send(ctx context.Context, m adapter.Outgoing) error { return nil }

func (r *room) Status() []adapter.Status { return []adapter.Status{{Name: "room", Mode: "forward"}} }

// A platform registers a Driver in init(). Configure declares its flags
// (they appear on `nekro serve`) and returns what builds the adapter once
// the flags are parsed: nil when nothing is configured. From then on the
// platform's chat keys ("room-lobby") belong to it. (Compiled, not run:
// a platform registers once per process.)
func ExampleRegister() {
	adapter.Register(adapter.Driver{Platform: "room", Configure: func(fs *flag.FlagSet) func() (adapter.Adapter, error) {
		var token string
		adapter.SecretString(fs, &token, "room-token", "NEKRO_ROOM_TOKEN", "the room server's token")
		return func() (adapter.Adapter, error) {
			if token == "" {
				return nil, nil // the platform stays off
			}
			return &room{token: token}, nil
		}
	}})
}

// A secret flag defaults to its environment variable, never shows its
// value in --help or errors, and draws a warning when given as a flag.
func ExampleSecretString() {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(os.Stdout)
	var token string
	adapter.SecretString(fs, &token, "chat-token", "NEKRO_CHAT_TOKEN", "the platform's access token")
	fs.PrintDefaults()
	// Output:
	//   -chat-token value
	//     	the platform's access token (env NEKRO_CHAT_TOKEN; prefer it: a flag shows in ps)
}
