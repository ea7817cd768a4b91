package agent_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/llm"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/models"
	"github.com/nekro-go/nekro/internal/testutil"
)

// Through the real binary: a chat long enough to overflow a small window
// (NEKRO_LLM_CONTEXT_WINDOW) gets prompts within the window that hold
// the summary the scripted model wrote; later turns reuse it (a summary
// is asked for once every few turns, not every turn); the run log (GET
// /api/runs/{run}) says what was summarized, and `nekro chats prompt`
// shows the summary in place.
func TestBinaryLongChatFitsTheWindow(t *testing.T) {
	var summaries atomic.Int32
	model, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		if isSummaryRequest(r) {
			return llmtest.Reply{Text: fmt.Sprintf("SUMMARY-%d: user U sent numbered messages of words.", summaries.Add(1))}
		}
		return llmtest.Code(`send_msg_text(_ck, "noted")`)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	data := testutil.DataDir(t)

	// The prompt of an empty chat: what the window must hold besides
	// the history (the runtime contract, every built-in plugin's docs).
	r := testutil.RunNekro(t, nil, "--data", data, "chats", "prompt", "probe", "--json")
	var probe struct {
		Messages []llm.ChatMessage `json:"messages"`
	}
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &probe) != nil {
		t.Fatalf("chats prompt: %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	const reserve, room = 500, 2400
	window := llm.EstimatePrompt(probe.Messages) + reserve + room
	const token = "test-token-0123456789"
	srv := testutil.Serve(t, data, token, "NEKRO_LLM_BASE_URL="+model.URL, "NEKRO_LLM_MODEL=scripted",
		"NEKRO_LLM_CONTEXT_WINDOW="+strconv.Itoa(window), "NEKRO_LLM_MAX_TOKENS="+strconv.Itoa(reserve))

	var set models.Settings
	if st, body := srv.API("GET", "/api/models", nil); st != http.StatusOK || json.Unmarshal([]byte(body), &set) != nil ||
		len(set.Groups) != 1 || set.Groups[0].ContextWindow != window || set.Groups[0].MaxTokens != reserve {
		t.Fatalf("the seeded group: %d %s", st, body)
	}
	turns := func() []chat.Turn {
		var out struct {
			Turns []chat.Turn `json:"turns"`
		}
		st, body := srv.API("GET", "/api/chats/long/turns", nil)
		if st != http.StatusOK || json.Unmarshal([]byte(body), &out) != nil {
			t.Fatalf("turns: %d %s", st, body)
		}
		return out.Turns
	}
	const n = 24
	var last chat.Turn
	for i := 1; i <= n; i++ {
		if st, body := srv.API("POST", "/api/chats/long/messages", map[string]string{"user_id": "u1", "user_name": "U", "text": longMessage(i)}); st != http.StatusAccepted {
			t.Fatalf("post %d: %d %s", i, st, body)
		}
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			ts := turns()
			if len(ts) == i && ts[i-1].Status != chat.TurnRunning {
				last = ts[i-1]
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("turn %d did not end: %+v\n%s", i, ts, srv.Logs)
			}
		}
		if last.Status != chat.TurnDone {
			t.Fatalf("turn %d: %+v", i, last)
		}
	}
	prompt := window - reserve
	for i, r := range model.Requests() {
		if !isSummaryRequest(r) {
			if got := llm.EstimatePrompt(r.Messages); got > prompt {
				t.Errorf("request %d: %d tokens estimated, over the %d the window leaves", i, got, prompt)
			}
		}
	}
	got := int(summaries.Load())
	t.Logf("window %d (prompt %d): %d turns, %d summaries; the last turn: %+v", window, prompt, n, got, *last.Context)
	if got < 1 || got > n/3 {
		t.Errorf("%d summaries for %d turns: want at least one, and far fewer than turns", got, n)
	}
	// Turns reuse the kept summary: most of those after the first
	// overflow show one they did not write.
	reused, shown := 0, 0
	for _, tr := range turns() {
		if tr.Context != nil && tr.Context.Summary {
			shown++
			if tr.Context.Summarized == 0 {
				reused++
			}
		}
	}
	if shown == 0 || reused < shown-got {
		t.Errorf("%d turns showed a summary, %d reused a kept one", shown, reused)
	}
	pc := last.Context
	if pc == nil || !pc.Summary || pc.SummaryCovered == 0 || pc.Window != window || pc.Reserve != reserve || pc.Tokens > prompt || pc.Omitted != 0 {
		t.Fatalf("the last turn's context: %+v", pc)
	}

	// The run log says what was summarized.
	var runs struct {
		Runs []chat.Run `json:"runs"`
	}
	if st, body := srv.API("GET", "/api/chats/long/runs", nil); st != http.StatusOK || json.Unmarshal([]byte(body), &runs) != nil || len(runs.Runs) == 0 {
		t.Fatalf("runs: %d %s", st, body)
	}
	id := runs.Runs[len(runs.Runs)-1].RunID
	var run chat.Run
	if st, body := srv.API("GET", "/api/runs/"+id, nil); st != http.StatusOK || json.Unmarshal([]byte(body), &run) != nil {
		t.Fatalf("run %s: %d %s", id, st, body)
	}
	if run.Context == nil || *run.Context != *pc {
		t.Errorf("GET /api/runs/%s: context %+v, the turn's %+v", id, run.Context, pc)
	}

	// The prompt a turn would start from shows the summary in place.
	r = testutil.RunNekro(t, nil, "--data", data, "chats", "prompt", "long")
	if r.Code != 0 || !strings.Contains(r.Stdout, "<history_summary>") || !strings.Contains(r.Stdout, "SUMMARY-") ||
		strings.Contains(r.Stdout, longMessage(1)) || !strings.Contains(r.Stdout, longMessage(n)) {
		t.Errorf("chats prompt: %d\n%.3000s\n%s", r.Code, r.Stdout, r.Stderr)
	}
}
