package cli_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

// nekro.timer from the command line: a timer set by a chat's code is in
// that chat's prompt only, and another chat can neither set one there nor
// change its recurring jobs.
func TestTimerPluginIsChatScoped(t *testing.T) {
	data := testutil.DataDir(t)
	run := func(chat, code string) testutil.Result {
		t.Helper()
		return testutil.RunNekro(t, []byte(code), "--data", data, "exec", "--chat", chat, "--user", "u1", "-")
	}
	r := run("a", `import time
print(set_timer(_ck, int(time.time()) + 3600, "water the plants", False))
print(set_timer(_ck, int(time.time()) - 10, "too late", False))
print("JOB=" + create_recurring_timer(_ck, "30 9 * * 1-5", "stand-up meeting", timezone="Asia/Shanghai", title="standup"))`)
	if r.Code != 0 || !strings.Contains(r.Stdout, "True\nFalse\nJOB=") {
		t.Fatalf("set: %+v", r)
	}
	job := strings.TrimSpace(r.Stdout[strings.Index(r.Stdout, "JOB=")+4:])
	if len(job) != 32 {
		t.Fatalf("job id %q", job)
	}
	if r := run("b", `set_timer("a", 0, "intrude", False)`); r.Code == 0 || !strings.Contains(r.Stdout+r.Stderr, "not this chat") {
		t.Errorf("chat b set a timer in a: %+v", r)
	}
	if r := run("b", `delete_recurring_timer("`+job+`")`); r.Code == 0 || !strings.Contains(r.Stdout+r.Stderr, "no recurring job") {
		t.Errorf("chat b deleted a's job: %+v", r)
	}
	if r := run("b", `print(list_recurring_timers(_ck))`); !strings.Contains(r.Stdout, "'count': 0") {
		t.Errorf("chat b lists: %+v", r)
	}
	pa := testutil.RunNekro(t, nil, "--data", data, "chats", "prompt", "a")
	pb := testutil.RunNekro(t, nil, "--data", data, "chats", "prompt", "b")
	for _, want := range []string{"water the plants", "Type: Regular", "ID: " + job, "Cron: 30 9 * * 1-5", "standup", "TZ: Asia/Shanghai"} {
		if !strings.Contains(pa.Stdout, want) {
			t.Errorf("a's prompt lacks %q:\n%s", want, pa.Stdout)
		}
	}
	if strings.Contains(pb.Stdout, "water the plants") || !strings.Contains(pb.Stdout, "No active timers") {
		t.Errorf("b's prompt:\n%s", pb.Stdout)
	}
	if r := run("a", `pause_recurring_timer("`+job+`")
print(list_recurring_timers(_ck, status="paused")["count"])
print(set_timer(_ck, -1, "", False))`); r.Code != 0 || !strings.Contains(r.Stdout, "1\nTrue") {
		t.Errorf("pause and clear: %+v", r)
	}
	if pa := testutil.RunNekro(t, nil, "--data", data, "chats", "prompt", "a"); strings.Contains(pa.Stdout, "water the plants") ||
		!strings.Contains(pa.Stdout, "paused=1") {
		t.Errorf("a's prompt after clearing:\n%s", pa.Stdout)
	}
}

// serveNekro starts `nekro serve` on data and returns its API and a stop.
func serveNekro(t *testing.T, data, modelURL string) (api func(method, path string, body any) (int, string), logs *bytes.Buffer, stop func()) {
	t.Helper()
	srv := testutil.Serve(t, data, "tok-timer", "NEKRO_LLM_BASE_URL="+modelURL, "NEKRO_LLM_MODEL=scripted")
	return srv.API, srv.Logs, srv.Stop
}

// A timer the AI sets fires a turn that answers in the chat when due, not
// before; one due while nekro is stopped fires once after it starts
// again, saying how late.
func TestTimerFiresThroughNekroServe(t *testing.T) {
	model, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		// What the newest message asks: the latest of the cues.
		last := r.Last()
		cut := 0
		for _, cue := range []string{"remind me soon", "remind me later", "定时提醒"} {
			cut = max(cut, strings.LastIndex(last, cue))
		}
		last = last[cut:]
		switch {
		case strings.Contains(last, "定时提醒") && strings.Contains(last, "late by"):
			return llmtest.Code(`send_msg_text(_ck, "late reminder: feed the cat")`)
		case strings.Contains(last, "定时提醒") && strings.Contains(last, "drink water"):
			return llmtest.Code(`send_msg_text(_ck, "time to drink water")`)
		case strings.Contains(last, "remind me soon"):
			return llmtest.Code(`import time
set_timer(_ck, int(time.time()) + 3, "drink water", False)
send_msg_text(_ck, "ok, soon")`)
		case strings.Contains(last, "remind me later"):
			return llmtest.Code(`import time
set_timer(_ck, int(time.time()) + 3, "feed the cat", False)
send_msg_text(_ck, "ok, later")`)
		}
		return llmtest.Code(`send_msg_text(_ck, "hello")`)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	data := testutil.DataDir(t)
	api, logs, stop := serveNekro(t, data, model.URL)
	waitFor := func(api func(string, string, any) (int, string), chat, want string, within time.Duration) string {
		t.Helper()
		for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if _, h := api("GET", "/api/chats/"+chat+"/messages", nil); strings.Contains(h, want) {
				return h
			}
		}
		_, h := api("GET", "/api/chats/"+chat+"/messages", nil)
		t.Fatalf("chat %s never showed %q:\n%s\n%s", chat, want, h, logs.String())
		return ""
	}
	set := time.Now()
	if st, body := api("POST", "/api/chats/a/messages", map[string]string{"user_id": "u1", "text": "remind me soon"}); st != http.StatusAccepted {
		t.Fatalf("post: %d %s", st, body)
	}
	waitFor(api, "a", "ok, soon", 30*time.Second)
	waitFor(api, "a", "time to drink water", 30*time.Second)
	if time.Since(set) < 2*time.Second {
		t.Errorf("the timer fired after %v, before it was due", time.Since(set))
	}

	// Set, then nekro stops; the timer falls due while it is down.
	if st, body := api("POST", "/api/chats/a/messages", map[string]string{"user_id": "u1", "text": "remind me later"}); st != http.StatusAccepted {
		t.Fatalf("post: %d %s", st, body)
	}
	waitFor(api, "a", "ok, later", 30*time.Second)
	stop()
	time.Sleep(9 * time.Second)
	api2, logs2, _ := serveNekro(t, data, model.URL)
	logs = logs2
	h := waitFor(api2, "a", "late reminder: feed the cat", 30*time.Second)
	time.Sleep(2 * time.Second)
	if _, h = api2("GET", "/api/chats/a/messages", nil); strings.Count(h, "late reminder: feed the cat") != 1 {
		t.Errorf("the late timer fired other than once:\n%s", h)
	}
	n := 0
	for _, r := range model.RequestsFor("a") {
		if strings.Contains(r.Last(), "feed the cat") && strings.Contains(r.Last(), "定时提醒") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d turns for the late timer, want 1", n)
	}
}
