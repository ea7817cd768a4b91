package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/kv/kvtest"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/server"
)

// echoScript answers every request by sending back the texts of the
// messages the turn answers, so each answer names what it answered.
func echoScript(delay time.Duration) llmtest.Script {
	return func(r llmtest.Request) llmtest.Reply {
		reply := llmtest.Code(`send_msg_text(_ck, "answered: " + ` + pyQuote(answering(r)) + `)`)
		reply.Delay = delay
		return reply
	}
}

// answering returns the "#id" list of the messages the request answers.
func answering(r llmtest.Request) string {
	_, after, ok := strings.Cut(r.Last(), "Answer the new message(s) ")
	if !ok {
		return "?"
	}
	ids, _, _ := strings.Cut(after, ".")
	return ids
}

func pyQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Messages that arrive during a turn wait, and the next turn answers
// them; a message is never answered twice, and a chat's turns never
// overlap.
func TestMessagesDuringTurnAreQueued(t *testing.T) {
	e := startEnv(t, echoScript(300*time.Millisecond), nil)
	m1 := e.post("c-queue", "u1", "Ann", "first")
	time.Sleep(100 * time.Millisecond) // the first turn is waiting for the model
	m2 := e.post("c-queue", "u2", "Ben", "second")
	m3 := e.post("c-queue", "u1", "Ann", "third")
	turns := e.waitTurns("c-queue", 2)
	if len(turns) != 2 {
		t.Fatalf("%d turns, want 2: %+v", len(turns), turns)
	}
	if !turns[1].StartedAt.After(turns[0].FinishedAt) && !turns[1].StartedAt.Equal(turns[0].FinishedAt) {
		t.Fatalf("turns overlap: %+v", turns)
	}
	h := e.history("c-queue")
	byID := map[int64]chat.Message{}
	for _, m := range h {
		byID[m.ID] = m
	}
	if byID[m1.ID].TurnID != turns[0].ID || byID[m2.ID].TurnID != turns[1].ID || byID[m3.ID].TurnID != turns[1].ID {
		t.Fatalf("messages answered by turns %d, %d, %d; turns are %d, %d",
			byID[m1.ID].TurnID, byID[m2.ID].TurnID, byID[m3.ID].TurnID, turns[0].ID, turns[1].ID)
	}
	var answers []string
	for _, m := range h {
		if m.Role == chat.Assistant {
			answers = append(answers, m.Text)
		}
	}
	want := []string{"answered: #1", "answered: #2, #3"}
	if strings.Join(answers, "|") != strings.Join(want, "|") {
		t.Fatalf("answers %q, want %q", answers, want)
	}
	reqs := e.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	mustContain(t, "second turn's history", reqs[1].Last(), "you (assistant): answered: #1")
}

// History and execution records survive a restart, and the generated
// token is printed on the first start only.
func TestRestartKeepsHistoryRunsAndToken(t *testing.T) {
	var out1 bytes.Buffer
	e := startEnv(t, echoScript(0), func(o *serveOptions) {
		o.Token, o.TokenOut = "", &out1
	})
	tok := e.srv.Token
	if len(tok) < 32 || !strings.Contains(out1.String(), tok) {
		t.Fatalf("first start printed %q for token %q", out1.String(), tok)
	}
	if st, err := os.Stat(filepath.Join(e.dataDir, "api_token")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", st, err)
	}
	post := func() {
		var out map[string]any
		if st := e.callToken(tok, "POST", "/api/chats/c-restart/messages",
			map[string]string{"user_id": "u1", "text": "remember me"}, &out); st != http.StatusAccepted {
			t.Fatalf("post: %d %v", st, out)
		}
	}
	post()
	waitFinished := func() []chat.Turn {
		for range 3000 {
			var ts struct{ Turns []chat.Turn }
			e.callToken(tok, "GET", "/api/chats/c-restart/turns", nil, &ts)
			if len(ts.Turns) == 1 && ts.Turns[0].Status == chat.TurnDone {
				return ts.Turns
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatal("turn did not finish")
		return nil
	}
	waitFinished()
	var before, after struct {
		Messages []chat.Message
	}
	var runsBefore, runsAfter struct{ Runs []chat.Run }
	e.callToken(tok, "GET", "/api/chats/c-restart/messages", nil, &before)
	e.callToken(tok, "GET", "/api/chats/c-restart/runs", nil, &runsBefore)
	e.stop()

	var out2 bytes.Buffer
	e.opts.TokenOut = &out2
	e.start()
	if e.srv.Token != tok {
		t.Fatalf("token changed across restart")
	}
	if strings.Contains(out2.String(), tok) {
		t.Fatalf("second start printed the token again: %q", out2.String())
	}
	e.callToken(tok, "GET", "/api/chats/c-restart/messages", nil, &after)
	e.callToken(tok, "GET", "/api/chats/c-restart/runs", nil, &runsAfter)
	if len(before.Messages) != 2 || !jsonEqual(before.Messages, after.Messages) {
		t.Fatalf("history before %+v\nafter %+v", before.Messages, after.Messages)
	}
	if len(runsBefore.Runs) != 1 || !jsonEqual(runsBefore.Runs, runsAfter.Runs) {
		t.Fatalf("runs before %+v\nafter %+v", runsBefore.Runs, runsAfter.Runs)
	}
	if !strings.Contains(runsAfter.Runs[0].Code, `send_msg_text(_ck, "answered: " + "#1")`) || runsAfter.Runs[0].StopType != "NORMAL" {
		t.Fatalf("run after restart: %+v", runsAfter.Runs[0])
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// Without a model, posting a message says how to configure one, and the
// playground still runs code.
func TestNoModelConfigured(t *testing.T) {
	e := startEnv(t, nil, nil)
	var out map[string]string
	st := e.call("POST", "/api/chats/c-none/messages", map[string]string{"user_id": "u1", "text": "hello"}, &out)
	if st != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", st)
	}
	for _, want := range []string{"NEKRO_LLM_BASE_URL", "NEKRO_LLM_MODEL", "NEKRO_LLM_API_KEY", "/exec"} {
		mustContain(t, "error", out["error"], want)
	}
	if h := e.history("c-none"); len(h) != 0 {
		t.Fatalf("refused message was stored: %q", texts(h))
	}
	var res struct {
		StopType string `json:"stop_type"`
		Output   string `json:"output"`
		Calls    []struct {
			Method string `json:"method"`
		} `json:"calls"`
	}
	if st := e.call("POST", "/api/chats/c-none/exec", map[string]string{"code": "print(my_sum_function(2, 3))", "user_id": "u1"}, &res); st != http.StatusOK {
		t.Fatalf("exec: %d", st)
	}
	if res.StopType != "NORMAL" || res.Output != "5\n" || len(res.Calls) != 1 || res.Calls[0].Method != "my_sum_function" {
		t.Fatalf("exec result: %+v", res)
	}
	if runs := e.runs("c-none"); len(runs) != 1 || runs[0].Output != "5\n" {
		t.Fatalf("playground run not recorded: %+v", runs)
	}
}

// Every call needs the token.
func TestAPIRequiresToken(t *testing.T) {
	e := startEnv(t, nil, nil)
	for _, tc := range []struct{ method, path, token string }{
		{"GET", "/api/chats/c1/messages", ""},
		{"GET", "/api/chats/c1/messages", "wrong"},
		{"POST", "/api/chats/c1/exec", ""},
		{"GET", "/api/status", testToken + "x"},
		{"GET", "/api/nowhere", ""},
		{"GET", "/api/chats/c1/events", ""},
		{"GET", "/api/chats/c1/uploads/a.png", ""},
		{"POST", "/api/chats/c1/reset", "Bearer"},
	} {
		var out map[string]string
		if st := e.callToken(tc.token, tc.method, tc.path, map[string]string{"code": "print(1)"}, &out); st != http.StatusUnauthorized {
			t.Errorf("%s %s with token %q: %d, want 401", tc.method, tc.path, tc.token, st)
		}
	}
	if st := e.call("GET", "/api/chats/c1/messages", nil, nil); st != http.StatusOK {
		t.Fatalf("with the token: %d", st)
	}
}

// The event stream carries the turn as it happens.
func TestEventStream(t *testing.T) {
	e := startEnv(t, echoScript(0), nil)
	req, _ := http.NewRequest("GET", e.base+"/api/chats/c-events/events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	sc.Scan() // the subscription comment: the stream is live
	e.post("c-events", "u1", "Ivy", "ping")
	var seen []string
	var name string
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "event: "); ok {
			name = n
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev chat.Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type != name || ev.ChatKey != "c-events" {
			t.Fatalf("event %q carries %+v", name, ev)
		}
		switch ev.Type {
		case chat.EventMessage:
			seen = append(seen, "message "+string(ev.Message.Role)+": "+ev.Message.Text)
		case chat.EventTurn:
			seen = append(seen, "turn "+ev.Turn.Status)
		case chat.EventRun:
			seen = append(seen, "run "+ev.Run.StopType)
		}
		if ev.Type == chat.EventTurn && ev.Turn.Status != chat.TurnRunning {
			break
		}
	}
	want := []string{"message user: ping", "turn running", "message assistant: answered: #1", "run NORMAL", "turn done"}
	if strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
}

// Reset clears the history and fires every plugin's on-channel-reset
// hook with the chat's key.
func TestResetClearsHistoryAndFiresHook(t *testing.T) {
	resets := make(chan string, 4)
	e := startEnv(t, echoScript(0), func(o *serveOptions) {
		o.App.Host.Plugins = append(pluginhost.Registered(), resetRecorder(resets))
	})
	e.post("c-reset", "u1", "Jo", "hello")
	e.waitTurns("c-reset", 1)
	e.post("c-keep", "u1", "Jo", "hello")
	e.waitTurns("c-keep", 1)
	var out map[string]any
	if st := e.call("POST", "/api/chats/c-reset/reset", nil, &out); st != http.StatusOK {
		t.Fatalf("reset: %d %v", st, out)
	}
	select {
	case k := <-resets:
		if k != "c-reset" {
			t.Fatalf("hook got chat %q", k)
		}
	default:
		t.Fatal("on-channel-reset hook did not run")
	}
	if h := e.history("c-reset"); len(h) != 0 {
		t.Fatalf("history after reset: %q", texts(h))
	}
	if h := e.history("c-keep"); len(h) != 2 {
		t.Fatalf("another chat's history changed: %q", texts(h))
	}
	// The next turn starts from an empty history.
	e.post("c-reset", "u1", "Jo", "again")
	e.waitTurns("c-reset", 2)
	reqs := e.model.RequestsFor("c-reset")
	last := reqs[len(reqs)-1].Last()
	if strings.Contains(last, "hello") || !strings.Contains(last, "again") {
		t.Fatalf("history after reset still shows the old messages:\n%s", last)
	}
}

// Shutdown lets a turn in progress finish when it can.
func TestShutdownLetsTurnFinish(t *testing.T) {
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply {
		return llmtest.Code(`
import time
time.sleep(1)
send_msg_text(_ck, "finished")`)
	}, nil)
	e.post("c-graceful", "u1", "Kim", "slow task")
	waitRequests(t, e.model, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	e.srv = nil
	e.start()
	ts := e.turns("c-graceful")
	if len(ts) != 1 || ts[0].Status != chat.TurnDone {
		t.Fatalf("turns after a graceful stop: %+v", ts)
	}
	h := texts(e.history("c-graceful"))
	if h[len(h)-1] != "assistant: finished" {
		t.Fatalf("history: %q", h)
	}
}

// At the shutdown deadline, runs still going are stopped (MANUAL) and the
// turn is recorded as interrupted.
func TestShutdownDeadlineStopsRuns(t *testing.T) {
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply {
		return llmtest.Code(`
import time
send_msg_text(_ck, "working on it")
time.sleep(60)
send_msg_text(_ck, "never")`)
	}, nil)
	e.post("c-stop", "u1", "Lee", "endless task")
	// The run has started once its first message is in the history; a
	// cold sandbox on a busy machine may take seconds to get there.
	deadline := time.Now().Add(60 * time.Second)
	for !slices.ContainsFunc(e.history("c-stop"), func(m chat.Message) bool { return m.Text == "working on it" }) {
		if time.Now().After(deadline) {
			t.Fatalf("the run never started: history %q", texts(e.history("c-stop")))
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := e.srv.Shutdown(ctx)
	if err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Fatalf("shutdown error %v, want one saying turns were stopped", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("shutdown took %v", d)
	}
	e.srv = nil
	e.start()
	ts := e.turns("c-stop")
	if len(ts) != 1 || ts[0].Status != chat.TurnInterrupted {
		t.Fatalf("turns: %+v", ts)
	}
	runs := e.runs("c-stop")
	if len(runs) != 1 || runs[0].StopType != "MANUAL" {
		t.Fatalf("runs: %+v", runs)
	}
	if n := len(e.model.Requests()); n != 1 {
		t.Fatalf("%d model requests; a stopped turn must not ask again", n)
	}
}

func waitRequests(t *testing.T, m *llmtest.Server, n int) {
	t.Helper()
	for range 3000 {
		if len(m.Requests()) >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("model got %d requests, waiting for %d", len(m.Requests()), n)
}

// With a PostgreSQL URL, the chats live there (next to the KV store) and
// survive a restart.
func TestPostgresKeepsChatsAcrossRestart(t *testing.T) {
	u := kvtest.FreshSchema(t, kvtest.PostgresURL(t))
	e := startEnv(t, echoScript(0), func(o *serveOptions) { o.App.DatabaseURL = u })
	e.post("c-pg", "u1", "Pat", "stored in postgres")
	e.waitTurns("c-pg", 1)
	before := e.history("c-pg")
	e.stop()
	e.start()
	after := e.history("c-pg")
	if len(before) != 2 || !jsonEqual(before, after) {
		t.Fatalf("history before %q after %q", texts(before), texts(after))
	}
	if runs := e.runs("c-pg"); len(runs) != 1 || runs[0].StopType != "NORMAL" {
		t.Fatalf("runs: %+v", runs)
	}
	pool, err := db.OpenPostgres(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM chat_messages WHERE chat_key = 'c-pg'`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows in PostgreSQL: %d %v", n, err)
	}
	if _, err := os.Stat(filepath.Join(e.dataDir, "nekro.db")); err == nil {
		var m int
		d, _ := db.OpenSQLite(context.Background(), filepath.Join(e.dataDir, "nekro.db"), db.SQLiteOptions{})
		defer d.Close()
		if d.Read.QueryRow(`SELECT count(*) FROM chat_messages`).Scan(&m) == nil {
			t.Fatalf("chat tables were also created in the SQLite file (%d rows)", m)
		}
	}
}

// A busy address is a clear error, and nothing is left open or generated.
func TestStartOnBusyAddress(t *testing.T) {
	e := startEnv(t, nil, nil)
	dir := t.TempDir()
	var out bytes.Buffer
	_, err := app.Serve(context.Background(), app.Config{DataDir: dir}, server.Options{Listen: e.srv.Addr, TokenOut: &out})
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("start on a busy address: %v", err)
	}
	if out.Len() != 0 {
		t.Fatalf("a token was generated for a server that did not start: %q", out.String())
	}
}
