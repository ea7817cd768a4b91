package models_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/kv/kvtest"
	"github.com/nekro-go/nekro/internal/llm"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/models"
)

// The embedding group, seeded by NEKRO_LLM_EMBEDDING_* or edited, gives
// an embeddings client with its stored key; Test embeds one text instead
// of asking a chat question its model could not answer.
func TestEmbeddingGroup(t *testing.T) {
	ctx := context.Background()
	m, err := llmtest.Start(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "OK"} })
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := models.Open(ctx, kvtest.DatabaseOpener(t, "sqlite")(), models.Options{Client: llm.Config{RetryBase: time.Millisecond}, Refresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	if _, err := s.Embeddings(ctx, llm.EmbeddingOptions{}); !errors.Is(err, llm.ErrNoEmbeddingModel) {
		t.Fatalf("no group: err = %v, want ErrNoEmbeddingModel", err)
	}
	chat := llm.Config{BaseURL: m.URL, Model: "talker", APIKey: "seed-key"}
	seed := models.FromConfigs(chat, llm.GroupsFrom(chat, map[string]string{"NEKRO_LLM_EMBEDDING_MODEL": "embedder"}), nil)
	if err := s.Seed(ctx, seed); err != nil {
		t.Fatal(err)
	}
	e, err := s.Embeddings(ctx, llm.EmbeddingOptions{BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if vecs, err := e.Embed(ctx, []string{"a", "b", "c"}); err != nil || len(vecs) != 3 {
		t.Fatalf("embed: %d vectors, %v", len(vecs), err)
	}
	reqs := m.EmbeddingRequests()
	if len(reqs) != 2 || reqs[0].Model != "embedder" || reqs[0].Auth != "Bearer seed-key" {
		t.Fatalf("requests %+v, want 2 batches to embedder with the key", reqs)
	}

	// Edited (the key left out keeps the stored one), the next client
	// uses the edit.
	set, err := s.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range set.Groups {
		if g.Name == llm.GroupEmbedding {
			set.Groups[i].Model = "embedder-2"
		}
	}
	if err := s.Put(ctx, set); err != nil {
		t.Fatal(err)
	}
	e, err = s.Embeddings(ctx, llm.EmbeddingOptions{})
	if err != nil || e.Model() != "embedder-2" {
		t.Fatalf("after the edit: %v, %v", e, err)
	}
	got, err := s.Test(ctx, models.Group{Name: llm.GroupEmbedding, BaseURL: m.URL, Model: "embedder-2"})
	if err != nil || !strings.Contains(got, "256 dimensions") {
		t.Fatalf("Test of the embedding group = %q, %v", got, err)
	}
	last := m.EmbeddingRequests()[len(m.EmbeddingRequests())-1]
	if last.Auth != "Bearer seed-key" || len(m.Requests()) != 0 {
		t.Fatalf("Test sent %+v (and %d chat requests)", last, len(m.Requests()))
	}
}
