package attack_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

// serveWithUser starts `nekro serve` with a scripted model that answers
// every turn with one message, and makes the user mallory; it returns the
// server and mallory's token.
func serveWithUser(t *testing.T) (*testutil.Served, string) {
	t.Helper()
	model, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		return llmtest.Code(`send_msg_text(_ck, "answer")`)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	srv := testutil.Serve(t, testutil.DataDir(t), "tok-attack-chats",
		"NEKRO_LLM_BASE_URL="+model.URL, "NEKRO_LLM_MODEL=scripted", "NEKRO_LLM_API_KEY=sk-x")
	st, body := srv.API("POST", "/api/users", map[string]string{"user_id": "mallory", "name": "Mallory"})
	if st != http.StatusCreated {
		t.Fatalf("add user: %d %s", st, body)
	}
	var u struct{ Token string }
	if err := json.Unmarshal([]byte(body), &u); err != nil || u.Token == "" {
		t.Fatalf("add user: %s", body)
	}
	return srv, u.Token
}

// A user token cannot squat a chat platform's chat before its QQ user or
// group ever writes (it would then read all they write and make the bot
// message them), nor claim a chat the operator used only through the
// playground (runs and files, no messages).
func TestUserTokenCannotSquatPlatformOrUsedChats(t *testing.T) {
	srv, mallory := serveWithUser(t)
	for _, key := range []string{"onebot_v11-private_10001", "onebot_v11-group_20002"} {
		st, body := srv.Call("POST", "/api/chats/"+key+"/messages", mallory, map[string]string{"text": "first!"})
		if st != http.StatusForbidden || !strings.Contains(body, "onebot_v11 adapter") {
			t.Errorf("posting first to %s: %d %s, want 403 naming the adapter", key, st, body)
		}
		if st, body := srv.Call("GET", "/api/chats/"+key+"/messages", mallory, nil); st != http.StatusNotFound {
			t.Errorf("reading %s after the attempt: %d %s, want 404", key, st, body)
		}
		if st, body := srv.Call("POST", "/api/chats/"+key+"/reset", mallory, nil); st != http.StatusNotFound && st != http.StatusForbidden {
			t.Errorf("resetting %s: %d %s", key, st, body)
		}
	}
	// The operator's playground: a run and a file, no message.
	if st, body := srv.API("POST", "/api/chats/ops-playground/exec", map[string]string{
		"code": `open("/app/shared/notes.txt", "w").write("ops secrets")`}); st != http.StatusOK {
		t.Fatalf("operator exec: %d %s", st, body)
	}
	st, body := srv.Call("POST", "/api/chats/ops-playground/messages", mallory, map[string]string{"text": "mine now"})
	if st != http.StatusForbidden {
		t.Errorf("claiming the operator's playground chat: %d %s, want 403", st, body)
	}
	if st, body := srv.Call("GET", "/api/chats/ops-playground/runs", mallory, nil); st != http.StatusNotFound {
		t.Errorf("reading the playground's runs: %d %s, want 404", st, body)
	}
	// The operator adds a member to a platform chat explicitly; that
	// member may then read it, but not reset the platform users' history.
	if st, body := srv.API("PUT", "/api/chats/onebot_v11-group_20002/members/mallory", nil); st != http.StatusOK {
		t.Fatalf("operator adds mallory: %d %s", st, body)
	}
	if st, body := srv.Call("GET", "/api/chats/onebot_v11-group_20002/messages", mallory, nil); st != http.StatusOK {
		t.Errorf("an added member reads the group: %d %s", st, body)
	}
	if st, body := srv.Call("POST", "/api/chats/onebot_v11-group_20002/reset", mallory, nil); st != http.StatusForbidden {
		t.Errorf("an added member resets the group's history: %d %s, want 403", st, body)
	}
	// A chat nobody used is still the first poster's.
	if st, body := srv.Call("POST", "/api/chats/mallory-own/messages", mallory, map[string]string{"text": "hi"}); st != http.StatusAccepted {
		t.Errorf("a new chat: %d %s, want 202", st, body)
	}
}

// An event stream ends when what authorised it is taken away: the user
// removed from the chat, or deleted. Nothing said in the chat afterwards
// reaches it.
func TestEventStreamEndsOnRevocation(t *testing.T) {
	for _, revoke := range []string{"remove member", "delete user"} {
		t.Run(strings.ReplaceAll(revoke, " ", "-"), func(t *testing.T) {
			srv, mallory := serveWithUser(t)
			if st, body := srv.Call("POST", "/api/chats/shared-room/messages", mallory, map[string]string{"text": "hello"}); st != http.StatusAccepted {
				t.Fatalf("post: %d %s", st, body)
			}
			req, _ := http.NewRequest("GET", "http://"+srv.Addr+"/api/chats/shared-room/events", nil)
			req.Header.Set("Authorization", "Bearer "+mallory)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("events: %d", resp.StatusCode)
			}
			lines := make(chan string, 1000)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					lines <- sc.Text()
				}
			}()
			// The stream works: an operator's message arrives.
			if st, body := srv.API("POST", "/api/chats/shared-room/messages", map[string]string{"user_id": "op", "text": "before-revocation"}); st != http.StatusAccepted {
				t.Fatalf("post: %d %s", st, body)
			}
			waitLine(t, lines, "before-revocation", 30*time.Second)
			if revoke == "remove member" {
				if st, body := srv.API("DELETE", "/api/chats/shared-room/members/mallory", nil); st != http.StatusOK {
					t.Fatalf("remove member: %d %s", st, body)
				}
			} else if st, body := srv.API("DELETE", "/api/users/mallory", nil); st != http.StatusOK && st != http.StatusNoContent {
				t.Fatalf("delete user: %d %s", st, body)
			}
			if st, body := srv.API("POST", "/api/chats/shared-room/messages", map[string]string{"user_id": "op", "text": "AFTER-REVOCATION-SECRET"}); st != http.StatusAccepted {
				t.Fatalf("post: %d %s", st, body)
			}
			// The stream must end (with a revoked event) and never carry
			// the message posted after the revocation.
			deadline := time.After(30 * time.Second)
			sawRevoked := false
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						if !sawRevoked {
							t.Errorf("the stream ended without saying it was revoked")
						}
						return
					}
					if strings.Contains(l, "AFTER-REVOCATION-SECRET") {
						t.Fatalf("the revoked stream delivered a later message: %s", l)
					}
					if l == "event: revoked" {
						sawRevoked = true
					}
				case <-deadline:
					t.Fatalf("the stream is still open 30 s after the revocation")
				}
			}
		})
	}
}

// waitLine waits for a line of the stream holding want.
func waitLine(t *testing.T, lines <-chan string, want string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the stream ended before %q", want)
			}
			if strings.Contains(l, want) {
				return
			}
		case <-deadline:
			t.Fatalf("no %q on the stream within %s", want, within)
		}
	}
}
