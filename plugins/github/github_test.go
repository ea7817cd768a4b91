package github_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

const token = "tok-github"

func sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// The GitHub plugin in the standard binary's `nekro serve`, with a
// scripted model: a chat subscribes through its own code; an unsigned or
// wrongly signed push reaches no chat; a push signed with WEBHOOK_SECRET
// lands in the subscribed chat, and only there, and a turn answers it;
// the API token authenticates too; an oversize body is refused; while
// the plugin is disabled its handler is not called.
func TestGitHubWebhookThroughNekroServe(t *testing.T) {
	model, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(r.Last(), "GitHub 推送事件") {
			return llmtest.Code(`send_msg_text(_ck, "saw the push")`)
		}
		return llmtest.Code(`send_msg_text(_ck, "hello")`)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	data := testutil.DataDir(t)
	cmd := exec.Command(testutil.Nekro(t), "serve", "--data", data, "--listen", addr)
	cmd.Env = append(os.Environ(), "NEKRO_LLM_BASE_URL="+model.URL, "NEKRO_LLM_MODEL=scripted", "NEKRO_API_TOKEN="+token)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	raw := func(method, path string, body []byte, header map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+addr+path, bytes.NewReader(body))
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	auth := map[string]string{"Authorization": "Bearer " + token}
	api := func(method, path string, body any) (int, string) {
		t.Helper()
		var b []byte
		if body != nil {
			b, _ = json.Marshal(body)
		}
		return raw(method, path, b, auth)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if st, _ := api("GET", "/api/status", nil); st == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nekro serve did not start:\n%s", logs.String())
		}
	}
	history := func(chat string) string {
		_, h := api("GET", "/api/chats/"+chat+"/messages", nil)
		return h
	}
	waitFor := func(chat, want string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if strings.Contains(history(chat), want) {
				return
			}
		}
		t.Fatalf("chat %s never showed %q:\n%s\n%s", chat, want, history(chat), logs.String())
	}

	if st, body := api("PUT", "/api/plugins/nekro.github/config", map[string]any{"WEBHOOK_SECRET": "gh-secret"}); st != http.StatusOK {
		t.Fatalf("set the secret: %d %s", st, body)
	}
	// Chat a subscribes with its own code; chat b subscribes to another repository.
	if st, body := api("POST", "/api/chats/a/exec", map[string]string{"code": `print(subscribe_github_repo("octo/repo"))`}); st != http.StatusOK ||
		!strings.Contains(body, "成功订阅仓库 octo/repo") {
		t.Fatalf("subscribe: %d %s", st, body)
	}
	if st, body := api("POST", "/api/chats/b/exec", map[string]string{"code": `print(subscribe_github_repo("octo/other", ["push"]))`}); st != http.StatusOK ||
		!strings.Contains(body, "成功订阅仓库 octo/other 的 push 事件") {
		t.Fatalf("subscribe b: %d %s", st, body)
	}
	if st, body := api("POST", "/api/chats/a/exec", map[string]string{"code": `print(get_github_subscriptions())`}); st != http.StatusOK ||
		!strings.Contains(body, "octo/repo") || strings.Contains(body, "octo/other") {
		t.Fatalf("list: %d %s", st, body)
	}

	push := []byte(`{"ref":"refs/heads/main","before":"1111111111111111111111111111111111111111","after":"2222222222222222222222222222222222222222",
		"repository":{"full_name":"octo/repo"},"pusher":{"name":"mona"},"compare":"https://github.com/octo/repo/compare/a...b",
		"commits":[{"id":"2222222222222222222222222222222222222222","message":"Fix the flux capacitor\n\nlong text","author":{"name":"Mona"},"added":["a"],"modified":[],"removed":[]}]}`)
	gh := func(extra map[string]string) map[string]string {
		h := map[string]string{"X-GitHub-Event": "push", "Content-Type": "application/json"}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	for name, h := range map[string]map[string]string{
		"unsigned":     gh(nil),
		"wrong secret": gh(map[string]string{"X-Hub-Signature-256": sign("not-the-secret", push)}),
		"wrong token":  gh(map[string]string{"Authorization": "Bearer nope"}),
	} {
		if st, body := raw("POST", "/api/webhook/github", push, h); st != http.StatusUnauthorized {
			t.Errorf("%s: %d %s, want 401", name, st, body)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if h := history("a"); strings.Contains(h, "推送事件") {
		t.Fatalf("a refused call reached the chat:\n%s", h)
	}

	// Signed as GitHub signs: in chat a, a turn answers it.
	if st, body := raw("POST", "/api/webhook/github", push, gh(map[string]string{"X-Hub-Signature-256": sign("gh-secret", push)})); st != http.StatusOK {
		t.Fatalf("signed push: %d %s\n%s", st, body, logs.String())
	}
	waitFor("a", "Fix the flux capacitor")
	waitFor("a", "saw the push")
	if h := history("a"); !strings.Contains(h, "推送者: mona") || !strings.Contains(h, "[2222222] Fix the flux capacitor (作者: Mona)") {
		t.Errorf("the push is formatted wrong:\n%s", h)
	}
	if h := history("b"); strings.Contains(h, "推送事件") {
		t.Errorf("chat b, not subscribed to octo/repo, got the push:\n%s", h)
	}

	// The API token authenticates too: an issue event.
	issue := []byte(`{"action":"opened","issue":{"number":7,"title":"It breaks","user":{"login":"mona"},"state":"open","html_url":"https://github.com/octo/repo/issues/7","body":"steps"},"repository":{"full_name":"octo/repo"}}`)
	if st, body := raw("POST", "/api/webhook/github", issue, map[string]string{"X-GitHub-Event": "issues", "Authorization": "Bearer " + token}); st != http.StatusOK {
		t.Fatalf("issue with the token: %d %s", st, body)
	}
	waitFor("a", "Issue #7: It breaks")

	// Over 1 MiB: refused.
	big := append([]byte(`{"pad":"`), bytes.Repeat([]byte("x"), 1<<20)...)
	big = append(big, `"}`...)
	if st, body := raw("POST", "/api/webhook/github", big, gh(map[string]string{"X-Hub-Signature-256": sign("gh-secret", big)})); st != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversize: %d %s", st, body)
	}

	// Disabled: the handler is not called.
	if st, body := api("POST", "/api/plugins/nekro.github/disable", nil); st != http.StatusOK {
		t.Fatalf("disable: %d %s", st, body)
	}
	push2 := bytes.Replace(push, []byte("flux capacitor"), []byte("warp drive"), 1)
	if st, body := raw("POST", "/api/webhook/github", push2, gh(map[string]string{"X-Hub-Signature-256": sign("gh-secret", push2)})); st != http.StatusNotFound {
		t.Fatalf("push while disabled: %d %s", st, body)
	}
	time.Sleep(300 * time.Millisecond)
	if h := history("a"); strings.Contains(h, "warp drive") {
		t.Fatalf("a disabled plugin's handler ran:\n%s", h)
	}
	if st, body := api("POST", "/api/plugins/nekro.github/enable", nil); st != http.StatusOK {
		t.Fatalf("enable: %d %s", st, body)
	}
	if st, body := raw("POST", "/api/webhook/github", push2, gh(map[string]string{"X-Hub-Signature-256": sign("gh-secret", push2)})); st != http.StatusOK {
		t.Fatalf("push once enabled: %d %s", st, body)
	}
	waitFor("a", "warp drive")

	// Unsubscribed: the next push does not reach the chat.
	if st, body := api("POST", "/api/chats/a/exec", map[string]string{"code": `print(unsubscribe_github_repo("octo/repo"))`}); st != http.StatusOK ||
		!strings.Contains(body, "成功取消订阅仓库 octo/repo") {
		t.Fatalf("unsubscribe: %d %s", st, body)
	}
	push3 := bytes.Replace(push, []byte("flux capacitor"), []byte("time circuits"), 1)
	if st, body := raw("POST", "/api/webhook/github", push3, gh(map[string]string{"X-Hub-Signature-256": sign("gh-secret", push3)})); st != http.StatusOK {
		t.Fatalf("push after unsubscribing: %d %s", st, body)
	}
	time.Sleep(300 * time.Millisecond)
	if h := history("a"); strings.Contains(h, "time circuits") {
		t.Fatalf("an unsubscribed chat got the push:\n%s", h)
	}
}

// A signed delivery sent again, as GitHub sent it or with a new delivery
// id (the header is not signed, so whoever captured the delivery can
// change it), is answered 200 "duplicate" and reaches no chat: the push
// is announced once. A new delivery still goes through.
func TestGitHubWebhookReplayIsIgnored(t *testing.T) {
	model, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "Thanks, seen."} })
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	s := testutil.Serve(t, testutil.DataDir(t), token, "NEKRO_LLM_BASE_URL="+model.URL, "NEKRO_LLM_MODEL=scripted")
	if st, body := s.API("PUT", "/api/plugins/nekro.github/config", map[string]any{"WEBHOOK_SECRET": "gh-secret"}); st != http.StatusOK {
		t.Fatalf("set the secret: %d %s", st, body)
	}
	if st, body := s.API("POST", "/api/chats/r/exec", map[string]string{"code": `print(subscribe_github_repo("octo/repo"))`}); st != http.StatusOK ||
		!strings.Contains(body, "octo/repo") {
		t.Fatalf("subscribe: %d %s", st, body)
	}
	deliver := func(body []byte, delivery string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+s.Addr+"/api/webhook/github", bytes.NewReader(body))
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-GitHub-Delivery", delivery)
		req.Header.Set("X-Hub-Signature-256", sign("gh-secret", body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	push := []byte(`{"ref":"refs/heads/main","repository":{"full_name":"octo/repo"},"pusher":{"name":"mona"},
		"commits":[{"id":"3333333333333333333333333333333333333333","message":"Replay me","author":{"name":"Mona"}}]}`)
	const id = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
	for i := range 4 {
		st, body := deliver(push, id)
		if st != http.StatusOK || strings.Contains(body, `"duplicate"`) != (i > 0) {
			t.Fatalf("delivery %d of the same push: %d %s", i+1, st, body)
		}
	}
	if st, body := deliver(push, "a-fresh-id-the-attacker-chose"); st != http.StatusOK || !strings.Contains(body, `"duplicate": true`) {
		t.Fatalf("the push replayed under another delivery id: %d %s", st, body)
	}
	next := bytes.Replace(push, []byte("Replay me"), []byte("A new commit"), 1)
	if st, body := deliver(next, "9c1f2a40-cc78-11e3-81ab-4c9367dc0958"); st != http.StatusOK || strings.Contains(body, `"duplicate"`) {
		t.Fatalf("a new delivery: %d %s", st, body)
	}
	// The handler pushes before the call is answered, so the chat holds
	// every push the calls delivered once the last one shows.
	var h string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, h = s.API("GET", "/api/chats/r/messages", nil)
		if strings.Contains(h, "A new commit") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new push never arrived:\n%s\n%s", h, s.Logs)
		}
	}
	if n := strings.Count(h, "Replay me"); n != 1 {
		t.Errorf("the push reached the chat %d times, want once:\n%s", n, h)
	}
}
