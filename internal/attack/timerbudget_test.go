package attack_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

// One chat's code sets many timers, each waking the model when it fires:
// a chat could keep the model busy without bound on the operator's
// account. Its timers wake at most --timer-turns-per-hour turns; the
// firings past it are kept in the history without a turn, saying why,
// and the log warns.
func TestChatTimersWakeTheModelWithinTheirBudget(t *testing.T) {
	const budget, timers = 3, 6
	model, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(r.Last(), "定时提醒") {
			return llmtest.Code(`import time; send_msg_text(_ck, "woken by a timer at %f" % time.time())`)
		}
		// Timers two seconds apart: without the budget each would get a
		// turn of its own.
		return llmtest.Code(`import time
now = int(time.time())
for i in range(6):
    set_timer(_ck, now + 3 + 2 * i, "wake %d" % i, False)
send_msg_text(_ck, "timers set")`)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	srv := testutil.Serve(t, testutil.DataDir(t), "tok-timer-budget", "NEKRO_LLM_BASE_URL="+model.URL,
		"NEKRO_LLM_MODEL=scripted", "NEKRO_TIMER_TURNS_PER_HOUR=3")
	if st, body := srv.API("POST", "/api/chats/greedy/messages", map[string]string{"user_id": "u1", "text": "set many timers"}); st != http.StatusAccepted {
		t.Fatalf("post: %d %s", st, body)
	}
	history := func() string {
		_, h := srv.API("GET", "/api/chats/greedy/messages", nil)
		return h
	}
	// Every timer fires: its message is in the history, answered or not.
	for deadline := time.Now().Add(3 * time.Minute); strings.Count(history(), "定时提醒") < timers; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not all %d timers fired:\n%s\n%s", timers, history(), srv.Logs.String())
		}
	}
	// Turns already granted finish: wait until the model has been quiet
	// a while.
	timerTurns := func() int {
		n := 0
		for _, r := range model.RequestsFor("greedy") {
			if strings.Contains(r.Last(), "定时提醒") {
				n++
			}
		}
		return n
	}
	for last, quiet := timerTurns(), time.Now(); time.Since(quiet) < 8*time.Second; time.Sleep(200 * time.Millisecond) {
		if n := timerTurns(); n != last {
			last, quiet = n, time.Now()
		}
	}
	if n := timerTurns(); n < 1 || n > budget {
		t.Errorf("the chat's timers woke the model %d times, want 1 to the budget's %d:\n%s", n, budget, history())
	}
	h := history()
	if got := strings.Count(h, "[no turn: this chat's timers already woke the model 3 times in the past hour"); got != timers-budget {
		t.Errorf("%d timer messages say they got no turn, want %d:\n%s", got, timers-budget, h)
	}
	if !strings.Contains(h, "--timer-turns-per-hour") {
		t.Errorf("the history does not name the setting:\n%s", h)
	}
	logs := srv.Logs.String()
	if !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "chat=greedy budget=3 flag=--timer-turns-per-hour") {
		t.Errorf("no warning naming the chat, the budget and the flag:\n%s", logs)
	}
}
