package llm_test

import (
	"context"
	"errors"
	"github.com/nekro-go/nekro/internal/llm"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
)

func startModel(t *testing.T, script llmtest.Script) *llmtest.Server {
	t.Helper()
	m, err := llmtest.Start(script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func client(t *testing.T, m *llmtest.Server, tweak func(*llm.Config)) *llm.Client {
	t.Helper()
	cfg := llm.Config{BaseURL: m.URL, Model: "m1", APIKey: "secret", RetryBase: time.Millisecond}
	if tweak != nil {
		tweak(&cfg)
	}
	c, err := llm.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClientSendsMessagesAndKey(t *testing.T) {
	m := startModel(t, func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "echo: " + r.Last()} })
	comp, err := client(t, m, nil).Complete(context.Background(), []llm.ChatMessage{
		llm.TextMessage("system", "be brief"), llm.TextMessage("user", "hi"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if comp.Text != "echo: hi" || comp.Attempts != 1 {
		t.Fatalf("completion %+v", comp)
	}
	r := m.Requests()[0]
	if r.Model != "m1" || r.Auth != "Bearer secret" || len(r.Messages) != 2 || r.Messages[0].Content.Text != "be brief" {
		t.Fatalf("request %+v", r)
	}
}

func TestClientRetriesRateLimitAndServerErrors(t *testing.T) {
	var n atomic.Int32
	m := startModel(t, func(r llmtest.Request) llmtest.Reply {
		switch n.Add(1) {
		case 1:
			return llmtest.Reply{Status: http.StatusTooManyRequests, Text: "slow down"}
		case 2:
			return llmtest.Reply{Status: http.StatusBadGateway, Text: "upstream hiccup"}
		}
		return llmtest.Reply{Text: "ok"}
	})
	comp, err := client(t, m, nil).Complete(context.Background(), []llm.ChatMessage{llm.TextMessage("user", "x")})
	if err != nil {
		t.Fatal(err)
	}
	if comp.Text != "ok" || comp.Attempts != 3 || len(m.Requests()) != 3 {
		t.Fatalf("completion %+v after %d requests", comp, len(m.Requests()))
	}
}

func TestClientHonoursRetryAfter(t *testing.T) {
	var n atomic.Int32
	m := startModel(t, func(r llmtest.Request) llmtest.Reply {
		if n.Add(1) == 1 {
			return llmtest.Reply{Status: http.StatusTooManyRequests, Text: "wait", RetryAfter: 1}
		}
		return llmtest.Reply{Text: "ok"}
	})
	start := time.Now()
	if _, err := client(t, m, nil).Complete(context.Background(), []llm.ChatMessage{llm.TextMessage("user", "x")}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Fatalf("retried after %v, before the server's Retry-After of 1s", d)
	}
}

func TestClientGivesUpAfterRetries(t *testing.T) {
	m := startModel(t, func(r llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Status: http.StatusServiceUnavailable, Text: "overloaded"}
	})
	_, err := client(t, m, func(c *llm.Config) { c.MaxRetries = 2 }).Complete(context.Background(),
		[]llm.ChatMessage{llm.TextMessage("user", "x")})
	if err == nil || !strings.Contains(err.Error(), "failed 3 times") || !strings.Contains(err.Error(), "503 Service Unavailable: overloaded") {
		t.Fatalf("error %v", err)
	}
	if n := len(m.Requests()); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
}

func TestClientDoesNotRetryClientErrors(t *testing.T) {
	m := startModel(t, func(r llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Status: http.StatusUnauthorized, Text: "Incorrect API key provided"}
	})
	_, err := client(t, m, nil).Complete(context.Background(), []llm.ChatMessage{llm.TextMessage("user", "x")})
	if err == nil || !strings.Contains(err.Error(), "401 Unauthorized: Incorrect API key provided (check NEKRO_LLM_API_KEY)") {
		t.Fatalf("error %v", err)
	}
	if n := len(m.Requests()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

func TestClientTimesOutEachAttempt(t *testing.T) {
	var n atomic.Int32
	m := startModel(t, func(r llmtest.Request) llmtest.Reply {
		if n.Add(1) == 1 {
			return llmtest.Reply{Text: "too late", Delay: 5 * time.Second}
		}
		return llmtest.Reply{Text: "in time"}
	})
	start := time.Now()
	comp, err := client(t, m, func(c *llm.Config) { c.Timeout = 200 * time.Millisecond }).Complete(context.Background(),
		[]llm.ChatMessage{llm.TextMessage("user", "x")})
	if err != nil {
		t.Fatal(err)
	}
	if comp.Text != "in time" || time.Since(start) > 3*time.Second {
		t.Fatalf("completion %+v after %v", comp, time.Since(start))
	}
}

func TestClientStopsWhenCancelled(t *testing.T) {
	m := startModel(t, func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "late", Delay: 10 * time.Second} })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := client(t, m, nil).Complete(ctx, []llm.ChatMessage{llm.TextMessage("user", "x")})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the context's", err)
	}
}

func TestConfigCheckSaysWhatIsMissing(t *testing.T) {
	for _, tc := range []struct {
		cfg  llm.Config
		want string
	}{
		{llm.Config{}, "no language model is configured: set NEKRO_LLM_BASE_URL"},
		{llm.Config{Model: "m"}, "NEKRO_LLM_MODEL is set but NEKRO_LLM_BASE_URL is not"},
		{llm.Config{BaseURL: "http://x/v1"}, "NEKRO_LLM_BASE_URL is set but NEKRO_LLM_MODEL is not"},
		{llm.Config{BaseURL: "localhost:8080", Model: "m"}, "is not an http(s) URL"},
	} {
		err := tc.cfg.Check()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
