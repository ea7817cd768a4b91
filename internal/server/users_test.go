package server_test

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

// Per-user access, attacked through the real `nekro serve` over HTTP: a
// user token reads and posts only in its own chats and as its own user,
// the operator's calls answer it 403, a removed user's token is 401 at
// once, and the operator's token still does everything.
func TestUserTokensThroughNekroServe(t *testing.T) {
	model, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		return llmtest.Code(`send_msg_text(_ck, "answered")`)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	const admin = "admin-token-users-test"
	srv := testutil.Serve(t, testutil.DataDir(t), admin, "NEKRO_LLM_BASE_URL="+model.URL, "NEKRO_LLM_MODEL=scripted")
	call := func(method, path, token string, body any, want int) string {
		t.Helper()
		st, out := srv.Call(method, path, token, body)
		if st != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, st, out, want)
		}
		return out
	}
	newUser := func(id string) string {
		t.Helper()
		var u struct{ UserID, Token string }
		json.Unmarshal([]byte(call("POST", "/api/users", admin, map[string]string{"user_id": id, "name": strings.ToUpper(id)}, http.StatusCreated)), &u)
		if u.Token == "" {
			t.Fatalf("no token for %s", id)
		}
		return u.Token
	}
	alice, bob := newUser("alice"), newUser("bob")
	call("POST", "/api/users", admin, map[string]string{"user_id": "alice"}, http.StatusConflict)

	// Alice's first post makes the chat hers; the message is hers whatever
	// the body says, and she cannot post as bob.
	call("POST", "/api/chats/alice-chat/messages", alice, map[string]string{"text": "hello"}, http.StatusAccepted)
	call("POST", "/api/chats/alice-chat/messages", alice, map[string]string{"user_id": "bob", "text": "I am bob"}, http.StatusForbidden)
	call("POST", "/api/chats/alice-chat/messages", alice, map[string]string{"user_id": "alice", "text": "again"}, http.StatusAccepted)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if strings.Contains(call("GET", "/api/chats/alice-chat/messages", alice, nil, http.StatusOK), "answered") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer:\n%s", srv.Logs)
		}
	}
	msgs := call("GET", "/api/chats/alice-chat/messages", alice, nil, http.StatusOK)
	if strings.Contains(msgs, `"sender_id": "bob"`) || !strings.Contains(msgs, `"sender_id": "alice"`) {
		t.Errorf("messages are not alice's:\n%s", msgs)
	}

	// Bob can neither read nor post in it; to him it does not exist,
	// exactly like a chat that does not.
	for _, p := range []string{"messages", "events", "runs", "turns", "uploads/x.txt", "members"} {
		a := call("GET", "/api/chats/alice-chat/"+p, bob, nil, http.StatusNotFound)
		b := call("GET", "/api/chats/no-such-chat/"+p, bob, nil, http.StatusNotFound)
		if strings.ReplaceAll(a, "alice-chat", "X") != strings.ReplaceAll(b, "no-such-chat", "X") {
			t.Errorf("%s: a chat's existence shows: %s vs %s", p, a, b)
		}
	}
	call("POST", "/api/chats/alice-chat/messages", bob, map[string]string{"text": "let me in"}, http.StatusForbidden)
	// The same through a multipart message with a file: refused, and
	// the file is not kept.
	if st := postMultipartAs(t, srv.Addr, bob, "alice-chat", "", "planted.txt"); st != http.StatusForbidden {
		t.Errorf("bob's multipart post into alice's chat: %d", st)
	}
	if st := postMultipartAs(t, srv.Addr, alice, "alice-chat", "bob", "planted.txt"); st != http.StatusForbidden {
		t.Errorf("alice's multipart post as bob: %d", st)
	}
	call("GET", "/api/chats/alice-chat/uploads/planted.txt", admin, nil, http.StatusNotFound)
	call("POST", "/api/chats/alice-chat/reset", bob, nil, http.StatusNotFound)
	// A chat with history and no members (the operator's, a chat
	// platform's) is not claimed by whoever posts first: its history
	// stays out of reach.
	call("POST", "/api/chats/ops-chat/exec", admin, map[string]string{"code": `send_msg_text(_ck, "operator secret")`}, http.StatusOK)
	call("POST", "/api/chats/ops-chat/messages", bob, map[string]string{"text": "mine now?"}, http.StatusForbidden)
	call("GET", "/api/chats/ops-chat/messages", bob, nil, http.StatusNotFound)
	if out := call("GET", "/api/chats", bob, nil, http.StatusOK); strings.Contains(out, "alice-chat") {
		t.Errorf("bob lists alice's chat: %s", out)
	}
	if out := call("GET", "/api/chats", alice, nil, http.StatusOK); !strings.Contains(out, "alice-chat") {
		t.Errorf("alice does not list her chat: %s", out)
	}
	if out := call("GET", "/api/me", bob, nil, http.StatusOK); !strings.Contains(out, `"user_id": "bob"`) || strings.Contains(out, "alice-chat") {
		t.Errorf("bob's /api/me: %s", out)
	}

	// The operator's calls.
	for _, c := range []struct{ method, path string }{
		{"POST", "/api/chats/bob-chat/exec"}, {"GET", "/api/plugins"}, {"GET", "/api/tasks"},
		{"GET", "/api/plugins/nekro.basic/config"}, {"POST", "/api/plugins/nekro.note/disable"},
		{"GET", "/api/users"}, {"POST", "/api/users"}, {"DELETE", "/api/users/alice"}, {"POST", "/api/users/bob/tokens"},
		{"PUT", "/api/chats/alice-chat/members/bob"}, {"DELETE", "/api/chats/alice-chat/members/alice"},
	} {
		call(c.method, c.path, bob, map[string]string{"code": "print(1)"}, http.StatusForbidden)
	}
	if out := call("GET", "/api/status", bob, nil, http.StatusOK); strings.Contains(out, "plugins") || !strings.Contains(out, "scripted") {
		t.Errorf("a user's status: %s", out)
	}

	// The operator adds bob: he reads and posts; a shared chat is reset
	// by the operator only; alone again, alice may reset it.
	call("PUT", "/api/chats/alice-chat/members/bob", admin, nil, http.StatusOK)
	call("GET", "/api/chats/alice-chat/messages", bob, nil, http.StatusOK)
	call("POST", "/api/chats/alice-chat/messages", bob, map[string]string{"text": "hi alice"}, http.StatusAccepted)
	call("POST", "/api/chats/alice-chat/reset", alice, nil, http.StatusForbidden)
	call("DELETE", "/api/chats/alice-chat/members/bob", admin, nil, http.StatusOK)
	call("GET", "/api/chats/alice-chat/messages", bob, nil, http.StatusNotFound)

	// A second token; removing the user revokes both at once.
	var tk struct{ Token string }
	json.Unmarshal([]byte(call("POST", "/api/users/bob/tokens", admin, nil, http.StatusCreated)), &tk)
	call("GET", "/api/me", tk.Token, nil, http.StatusOK)
	call("DELETE", "/api/users/bob", admin, nil, http.StatusOK)
	for _, tok := range []string{bob, tk.Token, "nku_forged", "", admin + "x"} {
		call("GET", "/api/me", tok, nil, http.StatusUnauthorized)
	}

	// The operator does everything.
	call("GET", "/api/chats/alice-chat/messages", admin, nil, http.StatusOK)
	call("POST", "/api/chats/alice-chat/exec", admin, map[string]string{"code": "print(1)"}, http.StatusOK)
	call("GET", "/api/plugins", admin, nil, http.StatusOK)
	if out := call("GET", "/api/users", admin, nil, http.StatusOK); !strings.Contains(out, `"alice-chat"`) || strings.Contains(out, `"bob"`) {
		t.Errorf("users: %s", out)
	}
	call("POST", "/api/chats/alice-chat/reset", alice, nil, http.StatusOK)
	if out := call("GET", "/api/me", admin, nil, http.StatusOK); !strings.Contains(out, `"admin": true`) {
		t.Errorf("admin's /api/me: %s", out)
	}
}

// postMultipartAs posts a multipart message with one small file and
// returns the status.
func postMultipartAs(t *testing.T, addr, token, chat, userID, fileName string) int {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if userID != "" {
		mw.WriteField("user_id", userID)
	}
	mw.WriteField("text", "see the file")
	fw, _ := mw.CreateFormFile("file", fileName)
	fw.Write([]byte("planted"))
	mw.Close()
	req, _ := http.NewRequest("POST", "http://"+addr+"/api/chats/"+chat+"/messages", &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
