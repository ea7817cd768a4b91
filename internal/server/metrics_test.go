package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

// GET /metrics through the real nekro serve, read with Prometheus' own
// text parser: a scripted turn whose code calls a plugin method moves the
// turn, run, call and latency series; the endpoint wants the operator's
// token (401 without, 403 with a user's).
func TestMetricsThroughNekroServe(t *testing.T) {
	model, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		if r.ChatKey() == "broken" {
			return llmtest.Reply{Status: http.StatusBadRequest, Text: "no such model"} // not retried
		}
		return llmtest.Code(`send_msg_text(_ck, "metrics hello")`)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	const admin = "admin-token-metrics"
	srv := testutil.Serve(t, testutil.DataDir(t), admin, "NEKRO_LLM_BASE_URL="+model.URL, "NEKRO_LLM_MODEL=scripted")

	if st, _ := srv.Call("GET", "/metrics", "", nil); st != http.StatusUnauthorized {
		t.Errorf("/metrics without a token: %d, want 401", st)
	}
	_, body := srv.API("POST", "/api/users", map[string]string{"user_id": "u1"})
	var u struct{ Token string }
	json.Unmarshal([]byte(body), &u)
	userTok := u.Token
	if st, _ := srv.Call("GET", "/metrics", userTok, nil); st != http.StatusForbidden {
		t.Errorf("/metrics with a user token: %d, want 403", st)
	}

	before := scrape(t, srv.Addr, admin)
	if v := counter(before, "nekro_turns_total", map[string]string{"outcome": "done"}); v != 0 {
		t.Errorf("turns done before any turn: %v", v)
	}
	if st, body := srv.API("POST", "/api/chats/m/messages", map[string]string{"user_id": "u1", "text": "hi"}); st != http.StatusAccepted {
		t.Fatalf("post: %d %s", st, body)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, turns := srv.API("GET", "/api/chats/m/turns", nil); strings.Contains(turns, `"status": "done"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the turn never finished:\n%s", srv.Logs)
		}
	}
	mf := scrape(t, srv.Addr, admin)
	if v := counter(mf, "nekro_turns_total", map[string]string{"outcome": "done"}); v != 1 {
		t.Errorf("nekro_turns_total{outcome=done} = %v, want 1", v)
	}
	if v := counter(mf, "nekro_runs_total", map[string]string{"stop_type": "NORMAL"}); v != 1 {
		t.Errorf("nekro_runs_total{stop_type=NORMAL} = %v, want 1", v)
	}
	if v := counter(mf, "nekro_tool_calls_total", map[string]string{"plugin": "nekro.basic", "method": "send_msg_text", "outcome": "ok"}); v != 1 {
		t.Errorf("nekro_tool_calls_total for send_msg_text = %v, want 1", v)
	}
	for _, h := range []string{"nekro_run_duration_seconds", "nekro_turn_duration_seconds"} {
		f := mf[h]
		if f == nil || f.GetType() != dto.MetricType_HISTOGRAM || f.Metric[0].GetHistogram().GetSampleCount() < 1 {
			t.Errorf("%s: no observation: %v", h, f)
		}
	}
	for _, g := range []string{"nekro_turn_queue_depth", "nekro_warm_spares"} {
		if f := mf[g]; f == nil || f.GetType() != dto.MetricType_GAUGE {
			t.Errorf("%s: missing or not a gauge", g)
		}
	}
	if v := counter(mf, "nekro_model_errors_total", nil); v != 0 {
		t.Errorf("model errors: %v", v)
	}

	// A failing model request, a failed turn; a playground run whose
	// method call fails (another chat's key is refused).
	if st, body := srv.API("POST", "/api/chats/broken/messages", map[string]string{"user_id": "u1", "text": "hi"}); st != http.StatusAccepted {
		t.Fatalf("post: %d %s", st, body)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, turns := srv.API("GET", "/api/chats/broken/turns", nil); strings.Contains(turns, `"status": "failed"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broken turn never failed:\n%s", srv.Logs)
		}
	}
	code := "try:\n    send_msg_text('someone-else', 'x')\nexcept Exception as e:\n    print(e)\n"
	if st, body := srv.API("POST", "/api/chats/m/exec", map[string]string{"code": code}); st != http.StatusOK {
		t.Fatalf("exec: %d %s", st, body)
	}
	mf = scrape(t, srv.Addr, admin)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"nekro_model_errors_total", nil, 1},
		{"nekro_turns_total", map[string]string{"outcome": "failed"}, 1},
		{"nekro_turns_total", map[string]string{"outcome": "done"}, 1},
		{"nekro_runs_total", map[string]string{"stop_type": "NORMAL"}, 2},
		{"nekro_tool_calls_total", map[string]string{"plugin": "nekro.basic", "method": "send_msg_text", "outcome": "error"}, 1},
	} {
		if v := counter(mf, c.name, c.labels); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
	for _, kind := range []string{"prompt", "completion"} {
		if f := mf["nekro_model_tokens_total"]; f == nil || !hasLabels(f, map[string]string{"kind": kind}) {
			t.Errorf("nekro_model_tokens_total{kind=%s} missing", kind)
		}
	}
}

// scrape fetches /metrics and parses it as Prometheus does.
func scrape(t *testing.T, addr, token string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("/metrics: %d %s", resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not the Prometheus text format: %v", err)
	}
	return mf
}

func hasLabels(f *dto.MetricFamily, want map[string]string) bool {
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		ok := true
		for k, v := range want {
			ok = ok && got[k] == v
		}
		if ok {
			return true
		}
	}
	return false
}

// counter returns the value of the counter series with exactly these
// labels among its own, or -1 when there is none.
func counter(mf map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := mf[name]
	if f == nil {
		return -1
	}
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		if len(got) != len(want) {
			continue
		}
		ok := true
		for k, v := range want {
			ok = ok && got[k] == v
		}
		if ok {
			return m.GetCounter().GetValue()
		}
	}
	return -1
}
