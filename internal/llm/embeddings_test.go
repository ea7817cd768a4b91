package llm_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/llm"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
)

func embeddingGroup(t *testing.T) (*llmtest.Server, llm.Config) {
	t.Helper()
	m := startModel(t, func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "unused"} })
	// The group comes from the same settings as every other group.
	groups := llm.GroupsFrom(llm.Config{BaseURL: m.URL, APIKey: "k", Model: "chat-model"},
		map[string]string{"NEKRO_LLM_EMBEDDING_MODEL": "embed-model"})
	cfg, ok := groups[llm.GroupEmbedding]
	if !ok {
		t.Fatalf("no %q group in %v", llm.GroupEmbedding, groups)
	}
	cfg.RetryBase = time.Millisecond
	return m, cfg
}

func TestEmbeddingsBatches(t *testing.T) {
	m, cfg := embeddingGroup(t)
	e, err := llm.NewEmbeddings(cfg, llm.EmbeddingOptions{BatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	texts := make([]string, 10)
	for i := range texts {
		texts[i] = fmt.Sprintf("text number %d", i)
	}
	vecs, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != len(texts) {
		t.Fatalf("%d vectors for %d texts", len(vecs), len(texts))
	}
	for i, v := range vecs {
		want := llmtest.Embed(texts[i], llmtest.EmbeddingDimensions)
		if len(v) != len(want) || v[0] != want[0] || v[len(v)-1] != want[len(want)-1] {
			t.Fatalf("vector %d is not the embedding of %q (order lost?)", i, texts[i])
		}
	}
	reqs := m.EmbeddingRequests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests for 10 texts in batches of 4, want 3", len(reqs))
	}
	for i, n := range []int{4, 4, 2} {
		if len(reqs[i].Input) != n || reqs[i].Model != "embed-model" || reqs[i].Auth != "Bearer k" {
			t.Errorf("request %d: %d inputs, model %q, auth %q", i, len(reqs[i].Input), reqs[i].Model, reqs[i].Auth)
		}
	}
}

func TestEmbeddingsDefaultBatchAndDimensions(t *testing.T) {
	m, cfg := embeddingGroup(t)
	e, err := llm.NewEmbeddings(cfg, llm.EmbeddingOptions{Dimensions: 32})
	if err != nil {
		t.Fatal(err)
	}
	texts := make([]string, llm.DefaultEmbeddingBatch+1)
	for i := range texts {
		texts[i] = fmt.Sprint("t", i)
	}
	vecs, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs[0]) != 32 {
		t.Errorf("vector has %d dimensions, asked 32", len(vecs[0]))
	}
	if n := len(m.EmbeddingRequests()); n != 2 {
		t.Errorf("%d requests for %d texts, want 2", n, len(texts))
	}
}

func TestEmbeddingsRetry(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			m, cfg := embeddingGroup(t)
			e, err := llm.NewEmbeddings(cfg, llm.EmbeddingOptions{BatchSize: 2})
			if err != nil {
				t.Fatal(err)
			}
			m.FailEmbeddings(2, status)
			vecs, err := e.Embed(context.Background(), []string{"a", "b", "c"})
			if err != nil {
				t.Fatal(err)
			}
			if len(vecs) != 3 {
				t.Fatalf("%d vectors", len(vecs))
			}
			// Two failures, then the first batch, then the second.
			if n := len(m.EmbeddingRequests()); n != 4 {
				t.Errorf("%d requests, want 4 (2 failed + 2 batches)", n)
			}
		})
	}
}

func TestEmbeddingsGivesUp(t *testing.T) {
	m, cfg := embeddingGroup(t)
	cfg.MaxRetries = 2
	e, err := llm.NewEmbeddings(cfg, llm.EmbeddingOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.FailEmbeddings(100, http.StatusBadGateway)
	_, err = e.Embed(context.Background(), []string{"a"})
	if err == nil || !strings.Contains(err.Error(), "failed 3 times") || !strings.Contains(err.Error(), "502") {
		t.Fatalf("err = %v, want a failure after 3 attempts naming 502", err)
	}
	if n := len(m.EmbeddingRequests()); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}

	// A 400 is not retried.
	m.FailEmbeddings(100, http.StatusBadRequest)
	before := len(m.EmbeddingRequests())
	if _, err := e.Embed(context.Background(), []string{"a"}); err == nil {
		t.Fatal("a 400 succeeded")
	}
	if n := len(m.EmbeddingRequests()) - before; n != 1 {
		t.Errorf("a 400 was sent %d times, want 1", n)
	}
}

func TestEmbeddingsContextFirst(t *testing.T) {
	m, cfg := embeddingGroup(t)
	cfg.RetryBase = time.Hour
	e, err := llm.NewEmbeddings(cfg, llm.EmbeddingOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.FailEmbeddings(1, http.StatusServiceUnavailable)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := e.Embed(ctx, []string{"a"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's deadline while backing off", err)
	}
}

func TestEmbeddingsNotConfigured(t *testing.T) {
	groups := llm.GroupsFrom(llm.Config{BaseURL: "http://127.0.0.1:1/v1", Model: "m"}, map[string]string{})
	if _, err := llm.NewEmbeddings(groups[llm.GroupEmbedding], llm.EmbeddingOptions{}); !errors.Is(err, llm.ErrNoEmbeddingModel) {
		t.Fatalf("err = %v, want ErrNoEmbeddingModel", err)
	}
}

func TestScriptedEmbeddingsRankBySharedWords(t *testing.T) {
	dot := func(a, b []float32) (s float32) {
		for i := range a {
			s += a[i] * b[i]
		}
		return s
	}
	q := llmtest.Embed("the cat sat on the mat", 256)
	near := llmtest.Embed("a cat on a mat", 256)
	far := llmtest.Embed("stock prices rose sharply", 256)
	if dot(q, near) <= dot(q, far) {
		t.Fatalf("sharing words is not closer: near %v, far %v", dot(q, near), dot(q, far))
	}
	if d := dot(q, q); d < 0.999 || d > 1.001 {
		t.Fatalf("not normalised: |v|² = %v", d)
	}
}
