package models_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/kv/kvtest"
	"github.com/nekro-go/nekro/internal/llm"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/models"
)

// Groups on both databases: the environment seeds them until the
// operator edits them; keys are never answered and kept when a PUT leaves
// them out; a failing group falls back to the next, which the answer
// names; sampling settings and extra fields reach the endpoint.
func TestGroupsRouteAndFallBack(t *testing.T) {
	ctx := context.Background()
	good, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "hello from " + r.Model} })
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	bad, err := llmtest.Start(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Status: http.StatusServiceUnavailable, Text: "down"}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			open := kvtest.DatabaseOpener(t, kind)
			opts := models.Options{Client: llm.Config{MaxRetries: 1, RetryBase: time.Millisecond}, Refresh: time.Hour}
			s, err := models.Open(ctx, open(), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Ready(ctx); err == nil {
				t.Fatal("ready with no groups")
			}
			// The environment may name groups for plugins only: turns then
			// have no model, and the plugins' group answers.
			if err := s.Seed(ctx, models.FromConfigs(llm.Config{}, map[string]llm.Config{"vision": {BaseURL: good.URL, Model: "eyes"}}, nil)); err != nil {
				t.Fatal(err)
			}
			if err := s.Ready(ctx); !errors.Is(err, llm.ErrNoModel) {
				t.Errorf("ready with only a vision group: %v", err)
			}
			if c, err := s.Route(ctx, "vision", nil); err != nil || c.Text != "hello from eyes" {
				t.Errorf("vision: %+v %v", c, err)
			}
			seed := models.FromConfigs(llm.Config{BaseURL: good.URL, Model: "env-model", APIKey: "env-key"}, nil, nil)
			if err := s.Seed(ctx, seed); err != nil {
				t.Fatal(err)
			}
			if c, err := s.Route(ctx, "", []llm.ChatMessage{llm.TextMessage("user", "hi")}); err != nil || c.Text != "hello from env-model" || c.Group != "chat" {
				t.Fatalf("seeded: %+v %v", c, err)
			}
			// Another process seeded by a different environment routes by
			// its own, until the groups are edited.
			o2 := opts
			o2.Refresh = time.Nanosecond
			s2, err := models.Open(ctx, open(), o2)
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			if err := s2.Seed(ctx, models.FromConfigs(llm.Config{BaseURL: good.URL, Model: "other-env"}, nil, nil)); err != nil {
				t.Fatal(err)
			}
			if c, err := s2.Route(ctx, "", nil); err != nil || c.Text != "hello from other-env" {
				t.Fatalf("the other process: %+v %v", c, err)
			}
			if c, err := s.Route(ctx, "", nil); err != nil || c.Text != "hello from env-model" {
				t.Fatalf("this process after another seeded: %+v %v", c, err)
			}
			if err := s.Seed(ctx, seed); err != nil {
				t.Fatal(err)
			}
			got, err := s.Get(ctx)
			if err != nil || len(got.Groups) != 1 || got.Groups[0].APIKey != "" || !got.Groups[0].HasKey || got.Source != models.SourceEnv {
				t.Fatalf("get: %+v %v", got, err)
			}
			temp := 0.5
			put := models.Settings{Default: "main", Groups: []models.Group{
				{Name: "main", BaseURL: bad.URL, Model: "broken", APIKey: "main-key", Fallback: "backup"},
				{Name: "backup", BaseURL: good.URL, Model: "spare", Temperature: &temp, MaxTokens: 7,
					Extra: map[string]json.RawMessage{"stop": json.RawMessage(`["\n"]`)}},
			}}
			if err := s.Put(ctx, put); err != nil {
				t.Fatal(err)
			}
			if c, err := s2.Route(ctx, "", nil); err != nil || c.Group != "backup" {
				t.Fatalf("the other process after the edit: %+v %v", c, err)
			}
			before := len(good.Requests())
			c, err := s.Route(ctx, "", []llm.ChatMessage{llm.TextMessage("user", "hi")})
			if err != nil || c.Group != "backup" || c.Text != "hello from spare" || c.Attempts != 3 {
				t.Fatalf("fallback: %+v %v", c, err)
			}
			last := good.Requests()[before]
			if string(last.Fields["temperature"]) != "0.5" || string(last.Fields["max_tokens"]) != "7" || string(last.Fields["stop"]) != `["\n"]` {
				t.Errorf("request fields: %v", last.Fields)
			}
			// "chat" still names the turns' group, whatever it is called.
			if c, err := s.Route(ctx, "chat", nil); err != nil || c.Group != "backup" {
				t.Errorf("chat: %+v %v", c, err)
			}
			if _, err := s.Route(ctx, "vision", nil); err == nil || !strings.Contains(err.Error(), "NEKRO_LLM_VISION_MODEL") {
				t.Errorf("unknown group: %v", err)
			}
			// The key stays when a PUT leaves it out; the environment no
			// longer applies.
			put.Groups[0].APIKey = ""
			if err := s.Put(ctx, put); err != nil {
				t.Fatal(err)
			}
			if err := s.Seed(ctx, seed); err != nil {
				t.Fatal(err)
			}
			got, _ = s.Get(ctx)
			if got.Default != "main" || !got.Groups[0].HasKey || got.Groups[0].APIKey != "" || got.Groups[1].HasKey || got.Source != models.SourceAPI {
				t.Errorf("after put: %+v", got)
			}
			n := len(bad.Requests())
			if _, err := s.Route(ctx, "main", nil); err != nil {
				t.Fatal(err)
			}
			if r := bad.Requests()[n]; r.Auth != "Bearer main-key" {
				t.Errorf("main's key after a PUT without it: %q", r.Auth)
			}
			// A group that is down, with no fallback: the error names it.
			put.Groups[0].Fallback = ""
			if err := s.Put(ctx, put); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Route(ctx, "", nil); err == nil || !strings.Contains(err.Error(), "503") {
				t.Errorf("no fallback: %v", err)
			}
			if ans, err := s.Test(ctx, models.Group{Name: "backup", BaseURL: good.URL, Model: "spare"}); err != nil || ans != "hello from spare" {
				t.Errorf("test: %q %v", ans, err)
			}
			if _, err := s.Test(ctx, models.Group{Name: "main", BaseURL: bad.URL, Model: "broken"}); err == nil {
				t.Error("test of a group that is down passed")
			}
			for _, wrong := range []models.Settings{
				{Default: "x", Groups: []models.Group{{Name: "a", BaseURL: good.URL, Model: "m"}}},
				{Groups: []models.Group{{Name: "chat", BaseURL: "ftp://x", Model: "m"}}},
				{Groups: []models.Group{{Name: "chat", BaseURL: good.URL, Model: "m", Fallback: "chat"}}},
				{Groups: []models.Group{{Name: "Chat!", BaseURL: good.URL, Model: "m"}}},
			} {
				if err := s.Put(ctx, wrong); err == nil {
					t.Errorf("accepted %+v", wrong)
				}
			}
		})
	}
}

// A group's window: the default when unset, the environment's seed, the
// smallest prompt room along the fallbacks, and windows too small for a
// prompt refused.
func TestGroupWindows(t *testing.T) {
	ctx := context.Background()
	s, err := models.Open(ctx, kvtest.DatabaseOpener(t, "sqlite")(), models.Options{Refresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if w, err := s.Window(ctx, ""); err != nil || w.Tokens != llm.DefaultContextWindow || w.Reserve != llm.DefaultAnswerReserve {
		t.Errorf("no groups: %+v %v", w, err)
	}
	vars := map[string]string{"NEKRO_LLM_SMALL_MODEL": "s", "NEKRO_LLM_SMALL_CONTEXT_WINDOW": "8000", "NEKRO_LLM_SMALL_MAX_TOKENS": "1000"}
	chat := llm.Config{BaseURL: "http://127.0.0.1:1/v1", Model: "m", ContextWindow: 128000}
	seed := models.FromConfigs(chat, llm.GroupsFrom(chat, vars), nil)
	if err := s.Seed(ctx, seed); err != nil {
		t.Fatal(err)
	}
	if w, err := s.Window(ctx, ""); err != nil || w != (llm.Window{Group: "chat", Tokens: 128000, Reserve: llm.DefaultAnswerReserve}) {
		t.Errorf("the seeded chat group: %+v %v", w, err)
	}
	if w, err := s.Window(ctx, "small"); err != nil || w != (llm.Window{Group: "small", Tokens: 8000, Reserve: 1000}) {
		t.Errorf("the seeded small group: %+v %v", w, err)
	}
	// chat falls back to small, whose room is smaller: a prompt for chat
	// is built to fit small.
	set, err := s.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	set.Groups[0].Fallback = "small"
	if err := s.Put(ctx, set); err != nil {
		t.Fatal(err)
	}
	if w, err := s.Window(ctx, ""); err != nil || w.Group != "small" || w.Prompt() != 7000 {
		t.Errorf("chat falling back to small: %+v %v", w, err)
	}
	// A max_tokens over half the default window reserves half of it.
	if w := (models.Group{Name: "x", MaxTokens: 60000}).Window(); w.Tokens != llm.DefaultContextWindow || w.Reserve != llm.DefaultContextWindow/2 {
		t.Errorf("a large max_tokens and no window: %+v", w)
	}
	set.Groups[1].ContextWindow = 1500
	if err := s.Put(ctx, set); err == nil || !strings.Contains(err.Error(), "context window of 1500 tokens") {
		t.Errorf("a window that leaves too little: %v", err)
	}
	set.Groups[1].ContextWindow = -1
	if err := s.Put(ctx, set); err == nil || !strings.Contains(err.Error(), "context_window") {
		t.Errorf("a negative window: %v", err)
	}
	bad := models.FromConfigs(chat, llm.GroupsFrom(chat, map[string]string{"NEKRO_LLM_V_MODEL": "v", "NEKRO_LLM_V_CONTEXT_WINDOW": "lots"}), nil)
	if err := bad.Check(); err == nil || !strings.Contains(err.Error(), "model group v: context_window") {
		t.Errorf("a window that is no number: %v", err)
	}
}
