package models_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/kv/kvtest"
	"github.com/nekro-go/nekro/internal/llm"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/models"
)

// storedConfig is the settings row as the database holds it.
func storedConfig(t *testing.T, h db.Handle) string {
	t.Helper()
	var q *sql.DB
	if h.SQLite != nil {
		q = h.SQLite.Read
	} else {
		q = stdlib.OpenDBFromPool(h.Postgres)
		defer q.Close()
	}
	var raw string
	if err := q.QueryRow(`SELECT config FROM model_settings WHERE id = 1`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	return raw
}

// Keys at rest: stored in the clear by a binary from before, they are
// sealed when a Store with a key file opens, and new ones are stored
// sealed; requests still carry them. Another key file cannot open them:
// the group is left out and its test says why, while the groups stay
// listed.
func TestKeysAreSealedAtRest(t *testing.T) {
	ctx := context.Background()
	m, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "hi"} })
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dir := t.TempDir()
	key, err := models.LoadKey(filepath.Join(dir, models.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := models.LoadKey(filepath.Join(dir, models.KeyFile)); err != nil || string(again) != string(key) {
		t.Fatalf("the key file was not kept: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, models.KeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", fi, err)
	}
	other, err := models.LoadKey(filepath.Join(t.TempDir(), models.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			open := kvtest.DatabaseOpener(t, kind)
			h := open()
			opts := models.Options{Client: llm.Config{MaxRetries: -1}, Refresh: time.Millisecond}
			old, err := models.Open(ctx, h, opts) // no key file: as before
			if err != nil {
				t.Fatal(err)
			}
			set := models.Settings{Groups: []models.Group{{Name: "chat", BaseURL: m.URL, Model: "m", APIKey: "sk-old-plain-1111"}}}
			if err := old.Put(ctx, set); err != nil {
				t.Fatal(err)
			}
			old.Close()
			if raw := storedConfig(t, h); !strings.Contains(raw, "sk-old-plain-1111") {
				t.Fatalf("the keyless store did not keep the key as given: %s", raw)
			}

			opts.Key = key
			s, err := models.Open(ctx, h, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			raw := storedConfig(t, h)
			if strings.Contains(raw, "sk-old-plain-1111") || !strings.Contains(raw, "nekro-sealed:v1:") {
				t.Fatalf("the stored key was not sealed on open: %s", raw)
			}
			set.Groups = append(set.Groups, models.Group{Name: "vision", BaseURL: m.URL, Model: "v", APIKey: "sk-new-2222"})
			set.Groups[0].APIKey = "" // kept
			if err := s.Put(ctx, set); err != nil {
				t.Fatal(err)
			}
			if raw := storedConfig(t, h); strings.Contains(raw, "sk-new-2222") || strings.Contains(raw, "sk-old-plain-1111") {
				t.Fatalf("a key is stored in the clear: %s", raw)
			}
			for group, want := range map[string]string{"chat": "sk-old-plain-1111", "vision": "sk-new-2222"} {
				if _, err := s.Route(ctx, group, nil); err != nil {
					t.Fatal(err)
				}
				reqs := m.Requests()
				if got := reqs[len(reqs)-1].Auth; got != "Bearer "+want {
					t.Errorf("group %s sent %q", group, got)
				}
			}
			got, err := s.Get(ctx)
			if err != nil || len(got.Groups) != 2 || !got.Groups[0].HasKey || got.Groups[0].APIKey != "" {
				t.Fatalf("get: %+v %v", got, err)
			}

			// A process with another key file.
			opts.Key = other
			wrong, err := models.Open(ctx, h, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer wrong.Close()
			if _, err := wrong.Test(ctx, models.Group{Name: "chat", BaseURL: m.URL, Model: "m"}); !errors.Is(err, models.ErrKeyMismatch) {
				t.Errorf("test with another key file: %v", err)
			}
			if _, err := wrong.Route(ctx, "chat", nil); err == nil {
				t.Error("a group whose key cannot be opened answered")
			}
			if got, err := wrong.Get(ctx); err != nil || len(got.Groups) != 2 {
				t.Errorf("the groups are not listed: %+v %v", got, err)
			}
		})
	}
}
