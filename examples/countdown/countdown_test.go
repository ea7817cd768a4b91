package countdown_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

// Through the real `nekro serve` and a scripted model: the plugin's route
// answers only with the token (its public path without), and 404 while
// the plugin is disabled; a background task started by the AI's code is
// listed while it waits, goes on when the route hands it the go-ahead, and
// its push wakes the agent, whose turn answers in the chat.
func TestRouteWakesABackgroundTaskThroughNekroServe(t *testing.T) {
	model, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		if r.Contains("the countdown went off: now") && !r.Contains("lift-off") {
			return llmtest.Code(`send_msg_text(_ck, "lift-off")`)
		}
		return llmtest.Code(`print(start_countdown())`)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	const tok = "tok-countdown"
	srv := testutil.ServeExamples(t, testutil.DataDir(t), tok, "NEKRO_LLM_BASE_URL="+model.URL, "NEKRO_LLM_MODEL=scripted")
	call := func(method, path, token string, body any) (int, string) {
		st, b := srv.Call(method, path, token, body)
		return st, strings.TrimSpace(b)
	}
	logs := srv.Logs
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s never happened:\n%s", what, logs.String())
			}
		}
	}

	// The routes and the token.
	const base = "/plugins/nekro_examples.countdown"
	if st, _ := call("GET", base+"/status", "", nil); st != http.StatusUnauthorized {
		t.Errorf("a route without the token: %d", st)
	}
	if st, body := call("GET", base+"/status", tok, nil); st != http.StatusOK || body != "counting" {
		t.Errorf("a route with the token: %d %q", st, body)
	}
	if st, body := call("GET", base+"/public/hello", "", nil); st != http.StatusOK || body != "hello" {
		t.Errorf("a public route: %d %q", st, body)
	}

	// The AI's code starts the task in a turn; it waits, listed.
	if st, body := call("POST", "/api/chats/launch/messages", tok, map[string]string{"user_id": "u1", "text": "start the countdown"}); st != http.StatusAccepted {
		t.Fatalf("post: %d %s", st, body)
	}
	waitFor("the task waiting", func() bool {
		_, body := call("GET", "/api/tasks", tok, nil)
		return strings.Contains(body, `"status": "running"`) && strings.Contains(body, "waiting for the go-ahead")
	})
	if st, _ := call("POST", base+"/go?chat=launch&word=now", "", nil); st != http.StatusUnauthorized {
		t.Errorf("the go-ahead without the token: %d", st)
	}
	if st, body := call("POST", base+"/go?chat=launch&word=now", tok, nil); st != http.StatusOK {
		t.Fatalf("the go-ahead: %d %s", st, body)
	}
	waitFor("the agent's answer", func() bool {
		_, body := call("GET", "/api/chats/launch/messages", tok, nil)
		return strings.Contains(body, "lift-off")
	})

	// Disabled, the plugin's routes are gone.
	if st, _ := call("POST", "/api/plugins/nekro_examples.countdown/disable", tok, nil); st != http.StatusOK {
		t.Fatalf("disable: %d", st)
	}
	if st, _ := call("GET", base+"/public/hello", "", nil); st != http.StatusNotFound {
		t.Errorf("a disabled plugin's route: %d", st)
	}
}
