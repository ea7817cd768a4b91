package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/nekro-go/nekro/internal/llm"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	_ "github.com/nekro-go/nekro/examples/all"
	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/server"
	"github.com/nekro-go/nekro/internal/testutil"
	"github.com/nekro-go/nekro/plugin"
	_ "github.com/nekro-go/nekro/plugins/all"
)

const testToken = "test-token-0123456789"

// env is one nekro server with its scripted model, both on loopback.
type env struct {
	t       testing.TB
	srv     *app.Served
	model   *llmtest.Server
	dataDir string
	opts    serveOptions
	base    string
}

// serveOptions are what a test's server is started with: how it serves
// and what app.Serve assembles.
type serveOptions struct {
	server.Options
	App app.Config
}

// startEnv starts a scripted model (if script is not nil) and a nekro
// server using it, in a fresh data directory.
func startEnv(t testing.TB, script llmtest.Script, tweak func(*serveOptions)) *env {
	t.Helper()
	e := &env{t: t, dataDir: testutil.DataDir(t)}
	if script != nil {
		m, err := llmtest.Start(script)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		e.model = m
	}
	e.opts = serveOptions{
		Options: server.Options{Listen: "127.0.0.1:0", Token: testToken, Log: slog.New(slog.DiscardHandler)},
		App:     app.Config{DataDir: e.dataDir},
	}
	if e.model != nil {
		e.opts.App.LLM = llm.Config{BaseURL: e.model.URL, Model: "scripted-model", APIKey: "model-key", RetryBase: time.Millisecond}
	}
	if tweak != nil {
		tweak(&e.opts)
	}
	e.start()
	return e
}

func (e *env) start() {
	e.t.Helper()
	srv, err := app.Serve(context.Background(), e.opts.App, e.opts.Options)
	if err != nil {
		e.t.Fatal(err)
	}
	e.srv, e.base = srv, "http://"+srv.Addr
	e.t.Cleanup(func() { e.stop() })
}

func (e *env) stop() {
	if e.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		e.t.Errorf("shutdown: %v", err)
	}
	e.srv = nil
}

// call sends a request with the test token and decodes the JSON answer
// into out (if not nil). It returns the status.
func (e *env) call(method, path string, body any, out any) int {
	e.t.Helper()
	return e.callToken(testToken, method, path, body, out)
}

func (e *env) callToken(token, method, path string, body any, out any) int {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.base+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			e.t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode
}

// post posts a user message and fails the test unless it is accepted.
func (e *env) post(chatKey, userID, userName, text string) chat.Message {
	e.t.Helper()
	var out struct {
		Message chat.Message `json:"message"`
		Error   string       `json:"error"`
	}
	if st := e.call("POST", "/api/chats/"+chatKey+"/messages",
		map[string]string{"user_id": userID, "user_name": userName, "text": text}, &out); st != http.StatusAccepted {
		e.t.Fatalf("post message: %d %s", st, out.Error)
	}
	return out.Message
}

func (e *env) history(chatKey string) []chat.Message {
	e.t.Helper()
	var out struct {
		Messages []chat.Message `json:"messages"`
	}
	if st := e.call("GET", "/api/chats/"+chatKey+"/messages", nil, &out); st != http.StatusOK {
		e.t.Fatalf("history: %d", st)
	}
	return out.Messages
}

func (e *env) runs(chatKey string) []chat.Run {
	e.t.Helper()
	var out struct {
		Runs []chat.Run `json:"runs"`
	}
	if st := e.call("GET", "/api/chats/"+chatKey+"/runs", nil, &out); st != http.StatusOK {
		e.t.Fatalf("runs: %d", st)
	}
	return out.Runs
}

func (e *env) turns(chatKey string) []chat.Turn {
	e.t.Helper()
	var out struct {
		Turns []chat.Turn `json:"turns"`
	}
	if st := e.call("GET", "/api/chats/"+chatKey+"/turns", nil, &out); st != http.StatusOK {
		e.t.Fatalf("turns: %d", st)
	}
	return out.Turns
}

// waitTurns waits until the chat has n finished turns and returns them.
func (e *env) waitTurns(chatKey string, n int) []chat.Turn {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ts := e.turns(chatKey)
		finished := 0
		for _, t := range ts {
			if t.Status != chat.TurnRunning {
				finished++
			}
		}
		if finished >= n {
			return ts
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("chat %s: %d of %d turns finished after 60s: %+v", chatKey, finished, n, ts)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// texts renders a history as "role: text" lines, for assertions and
// failure messages.
func texts(ms []chat.Message) []string {
	var out []string
	for _, m := range ms {
		s := string(m.Role) + ": " + m.Text
		for _, a := range m.Attachments {
			s += fmt.Sprintf(" [%s %s]", a.Kind, a.Path)
		}
		out = append(out, s)
	}
	return out
}

func mustContain(t testing.TB, what, s, sub string) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Fatalf("%s does not contain %q:\n%s", what, sub, s)
	}
}

// resetRecorder is a plugin, enabled only in the tests that list it, whose
// on-channel-reset hook records the chats reset.
func resetRecorder(reset chan<- string) *plugin.Plugin {
	p := plugin.New(plugin.Meta{Name: "Reset recorder", ModuleName: "reset_recorder", Author: "nekro_test", Version: "0"})
	p.OnChannelReset(func(ctx context.Context, chatKey string) error {
		reset <- chatKey
		return nil
	})
	return p
}
