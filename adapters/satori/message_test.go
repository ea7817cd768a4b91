package satori

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/adapter"
)

type quietHost struct{}

func (quietHost) Receive(context.Context, adapter.Message) error { return nil }
func (quietHost) Log() *slog.Logger                              { return slog.New(slog.DiscardHandler) }

// newTestAdapter is an adapter that has read a READY with one login on
// Discord (bot id "B") and the proxy route of a Lark-like platform.
func newTestAdapter(t *testing.T, c Config) *Adapter {
	t.Helper()
	c.URL = "http://satori.local:5140/satori/v1/"
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	var r readyBody
	if err := json.Unmarshal([]byte(`{"logins":[{"sn":1,"platform":"discord","status":1,"user":{"id":"B","name":"Nekko"}},
		{"sn":2,"platform":"qq","status":0,"user":{"id":"Q"}}],"proxy_urls":["internal:lark/"]}`), &r); err != nil {
		t.Fatal(err)
	}
	a.ready(quietHost{}, r, 0)
	return a
}

func ev(t *testing.T, s string) event {
	t.Helper()
	var e event
	if err := json.Unmarshal([]byte(s), &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// Events as the protocol writes them, and as servers before the Login
// field did, become chat messages with the right key, user, text,
// trigger and files.
func TestToMessage(t *testing.T) {
	a := newTestAdapter(t, Config{})
	if a.base != "http://satori.local:5140/satori" {
		t.Fatalf("base %q: /v1 and the trailing slash should go", a.base)
	}
	a.logins[loginKey("discord", "B")].sentIDs = []string{"m-1"}
	for _, c := range []struct {
		name, event string
		key, user   string
		text        string
		trigger     bool
		files       []string // kind url-or-data
	}{
		{"group context", `{"type":"message-created","login":{"platform":"discord","user":{"id":"B"}},"channel":{"id":"c1","type":0},"guild":{"id":"g"},
			"user":{"id":"u1","name":"alice"},"member":{"nick":"Ally"},"message":{"id":"1","content":"lunch &amp; tea?"}}`,
			"satori-discord-group_c1", "satori:discord:u1", "lunch & tea?", false, nil},
		{"group at", `{"type":"message-created","login":{"platform":"discord","user":{"id":"B"}},"channel":{"id":"c1","type":0},
			"user":{"id":"u1","name":"alice"},"message":{"id":"2","content":"<at id=\"B\"/> hi <at id=\"u2\" name=\"bob\"/> <at type=\"all\"/>"}}`,
			"satori-discord-group_c1", "satori:discord:u1", "@Nekko hi @bob @all", true, nil},
		{"quote object of the bot", `{"type":"message-created","login":{"platform":"discord","user":{"id":"B"}},"channel":{"id":"c1","type":0},
			"user":{"id":"u1"},"message":{"id":"3","content":"and then?","quote":{"id":"x","content":"once upon a time","user":{"id":"B","name":"Nekko"}}}}`,
			"satori-discord-group_c1", "satori:discord:u1", "[reply to Nekko: once upon a time] and then?", true, nil},
		{"quote element of a sent id", `{"type":"message-created","login":{"platform":"discord","user":{"id":"B"}},"channel":{"id":"c1","type":0},
			"user":{"id":"u1"},"message":{"id":"4","content":"<quote id=\"m-1\"/>really?"}}`,
			"satori-discord-group_c1", "satori:discord:u1", "[reply to Nekko] really?", true, nil},
		{"quote of someone else", `{"type":"message-created","login":{"platform":"discord","user":{"id":"B"}},"channel":{"id":"c1","type":0},
			"user":{"id":"u1"},"message":{"id":"5","content":"<quote id=\"z\"><author id=\"u3\" name=\"carol\"/>old news</quote>heh"}}`,
			"satori-discord-group_c1", "satori:discord:u1", "[reply to carol: old news] heh", false, nil},
		{"another bot", `{"type":"message-created","login":{"platform":"discord","user":{"id":"B"}},"channel":{"id":"c1","type":0},
			"user":{"id":"u9","is_bot":true},"message":{"id":"6","content":"<at id=\"B\"/> beep"}}`,
			"satori-discord-group_c1", "satori:discord:u9", "@Nekko beep", false, nil},
		{"old server, private", `{"type":"message-created","platform":"discord","self_id":"B","channel":{"id":"private:7"},
			"user":{"id":"7","name":"dave"},"message":{"id":"7","content":"hello<img src=\"https://cdn.example/a/cat.jpg?x=1\"/>"}}`,
			"satori-discord-private_private:7", "satori:discord:7", "hello", true, []string{"image https://cdn.example/a/cat.jpg?x=1 cat.jpg"}},
		{"resources", `{"type":"message-created","login":{"platform":"discord","user":{"id":"B"}},"channel":{"id":"d","type":1},
			"user":{"id":"u1"},"message":{"id":"8","content":"<file src=\"internal:lark/f/1\" title=\"r.pdf\"/><img src=\"data:image/png;base64,iVBORw==\"/><video src=\"ftp://x/v\"/>"}}`,
			"satori-discord-private_d", "satori:discord:u1", "[file #3 at a URL nekro cannot fetch: ftp://x/v]", true,
			[]string{"file http://satori.local:5140/satori/v1/proxy/internal:lark/f/1 r.pdf", "image data:4 image-8-2.png"}},
	} {
		m, ok := a.toMessage(ev(t, c.event))
		if !ok {
			t.Errorf("%s: not read", c.name)
			continue
		}
		if m.ChatKey != c.key || m.UserID != c.user || m.Text != c.text || m.Trigger != c.trigger {
			t.Errorf("%s: %s %s %q trigger %v\nwant %s %s %q trigger %v", c.name, m.ChatKey, m.UserID, m.Text, m.Trigger, c.key, c.user, c.text, c.trigger)
		}
		var files []string
		for _, f := range m.Files {
			src := f.URL
			if f.Data != nil {
				src = "data:" + string(rune('0'+len(f.Data)))
			}
			files = append(files, f.Kind+" "+src+" "+f.Name)
		}
		if strings.Join(files, "|") != strings.Join(c.files, "|") {
			t.Errorf("%s: files %q, want %q", c.name, files, c.files)
		}
	}
	if m, _ := a.toMessage(ev(t, `{"type":"message-created","login":{"platform":"discord","user":{"id":"B"}},"channel":{"id":"c1","type":0},
		"user":{"id":"u1","name":"alice"},"member":{"nick":"Ally"},"message":{"id":"1","content":"x"}}`)); m.UserName != "Ally" {
		t.Errorf("user name %q, want the member's nick", m.UserName)
	}
	// The bot's own messages are not read.
	if _, ok := a.toMessage(ev(t, `{"type":"message-created","login":{"platform":"discord","user":{"id":"B"}},"channel":{"id":"c1","type":0},
		"user":{"id":"B"},"message":{"id":"9","content":"pong"}}`)); ok {
		t.Error("the bot's own message was read")
	}
}

// --satori-platforms leaves the other platforms' logins and messages out.
func TestPlatformAllowList(t *testing.T) {
	a := newTestAdapter(t, Config{Platforms: []string{"qq"}})
	if _, ok := a.toMessage(ev(t, `{"type":"message-created","login":{"platform":"discord","user":{"id":"B"}},"channel":{"id":"d","type":1},
		"user":{"id":"u1"},"message":{"id":"1","content":"hi"}}`)); ok {
		t.Error("a message of a platform not allowed was read")
	}
	st := a.Status()
	if len(st) != 2 || st[1].Name != "satori:qq" || st[1].Connected {
		t.Errorf("status %+v: want the stream and the (offline) qq login only", st)
	}
	if _, err := a.loginFor("satori-discord-private_d", "discord"); err == nil {
		t.Error("a login of a platform not allowed was picked")
	}
	if _, err := New(Config{URL: "http://x", Platforms: []string{"bad-group_x"}}); err == nil {
		t.Error("a platform that breaks chat keys was accepted")
	}
}

// The sequence number is sn, or id on servers from before sn; login
// events do not count (they take no part in a resumption).
func TestSequence(t *testing.T) {
	a := newTestAdapter(t, Config{})
	for _, c := range []struct {
		event string
		want  int64
	}{
		{`{"sn":5,"type":"message-created"}`, 5},
		{`{"id":6,"type":"message-created"}`, 6},
		{`{"sn":9,"type":"login-updated","login":{"platform":"qq","status":1,"user":{"id":"Q"}}}`, 6},
		{`{"id":"abc","type":"message-created"}`, 6},
		{`{"sn":2,"type":"message-deleted"}`, 2},
	} {
		a.noteEvent(quietHost{}, ev(t, c.event))
		if got := a.lastSN(); got != c.want {
			t.Errorf("after %s: sn %d, want %d", c.event, got, c.want)
		}
	}
	if st := a.Status(); !st[2].Connected || st[2].Name != "satori:qq" {
		t.Errorf("login-updated should bring qq online: %+v", st)
	}
}
