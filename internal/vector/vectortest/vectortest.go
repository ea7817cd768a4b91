// Package vectortest is the conformance suite every vector.Store passes:
// Run(t, harness) checks scope isolation, replacement, deletion, ordering
// by similarity (with llmtest's deterministic embeddings), dimension
// checks and a second process's writes.
package vectortest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/vector"
)

// Harness gives a fresh, empty database per call and returns a function
// opening a store on it; each call of that function is another handle, as
// another nekro process sharing the database would open. Stores are
// closed by the harness when the test ends.
type Harness func(t *testing.T) (open func() vector.Store)

// Dim is the length of the suite's vectors.
const Dim = 64

// embed is the scripted embedding model's vector for text.
func embed(text string) []float32 { return llmtest.Embed(text, Dim) }

func item(scope, id, doc, text string) vector.Item {
	return vector.Item{ID: id, Scope: scope, Document: doc, Text: text, Vector: embed(text),
		Metadata: map[string]string{"source": doc}}
}

func search(t *testing.T, s vector.Store, text string, k int, scopes ...string) []vector.Hit {
	t.Helper()
	hits, err := s.Search(context.Background(), vector.Query{Scopes: scopes, Vector: embed(text), TopK: k})
	if err != nil {
		t.Fatalf("search %q in %v: %v", text, scopes, err)
	}
	return hits
}

func upsert(t *testing.T, s vector.Store, items ...vector.Item) {
	t.Helper()
	if err := s.Upsert(context.Background(), items); err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, s vector.Store, scopes ...string) int {
	t.Helper()
	n, err := s.Count(context.Background(), scopes...)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func ids(hits []vector.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Scope + "/" + h.ID
	}
	return out
}

var corpus = []struct{ id, text string }{
	{"cat", "the cat sat on the mat"},
	{"dog", "the dog chased the ball in the park"},
	{"stocks", "stock prices rose sharply on monday"},
	{"recipe", "mix flour eggs and sugar then bake"},
	{"cat2", "a black cat sleeps on a warm mat"},
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	ctx := context.Background()

	t.Run("Empty", func(t *testing.T) {
		s := h(t)()
		if hits := search(t, s, "anything", 5, "global"); len(hits) != 0 {
			t.Fatalf("empty store found %v", ids(hits))
		}
		if n := count(t, s); n != 0 {
			t.Fatalf("empty store counts %d", n)
		}
	})

	t.Run("OrderBySimilarity", func(t *testing.T) {
		s := h(t)()
		for _, c := range corpus {
			upsert(t, s, item("global", c.id, "doc-"+c.id, c.text))
		}
		hits := search(t, s, "cat on the mat", 3, "global")
		if len(hits) != 3 {
			t.Fatalf("top 3 gave %d hits", len(hits))
		}
		if hits[0].ID != "cat" || hits[1].ID != "cat2" {
			t.Fatalf("hits %v, want cat then cat2 first", ids(hits))
		}
		for i := 1; i < len(hits); i++ {
			if hits[i].Score > hits[i-1].Score {
				t.Fatalf("hits not best first: %v then %v", hits[i-1].Score, hits[i].Score)
			}
		}
		h0 := hits[0]
		if h0.Text != "the cat sat on the mat" || h0.Document != "doc-cat" || h0.Metadata["source"] != "doc-cat" || h0.Scope != "global" {
			t.Fatalf("hit %+v lost its text, document or metadata", h0)
		}
		exact := search(t, s, "mix flour eggs and sugar then bake", 1, "global")
		if len(exact) != 1 || exact[0].ID != "recipe" || exact[0].Score < 0.999 {
			t.Fatalf("the same text scored %v", exact)
		}
		if all := search(t, s, "cat", 100, "global"); len(all) != len(corpus) {
			t.Fatalf("top 100 of %d gave %d", len(corpus), len(all))
		}
		if _, err := s.Search(ctx, vector.Query{Scopes: []string{"global"}, Vector: embed("x"), TopK: vector.MaxTopK + 1}); err == nil {
			t.Fatal("top k beyond the limit accepted")
		}
	})

	t.Run("ScopeIsolation", func(t *testing.T) {
		s := h(t)()
		upsert(t, s,
			item("global", "g", "", "the weather is sunny today"),
			item("chat:a", "x", "", "alice likes green tea"),
			item("chat:b", "x", "", "bob likes black coffee"),
			item("chat:b", "y", "", "alice likes green tea"), // the same text in another chat
		)
		hits := search(t, s, "alice likes green tea", 10, "chat:a")
		if len(hits) != 1 || hits[0].Scope != "chat:a" || hits[0].Text != "alice likes green tea" {
			t.Fatalf("chat:a search found %v", ids(hits))
		}
		for _, h := range search(t, s, "bob likes black coffee", 10, "global", "chat:a") {
			if h.Scope == "chat:b" {
				t.Fatalf("a search of global+chat:a returned chat:b's %q", h.Text)
			}
		}
		if got := ids(search(t, s, "alice likes green tea sunny weather", 10, "global", "chat:a")); len(got) != 2 {
			t.Fatalf("global+chat:a gave %v, want both of their items", got)
		}
		if n := count(t, s, "chat:b"); n != 2 {
			t.Fatalf("chat:b counts %d", n)
		}
		if n := count(t, s, "chat:a", "global"); n != 2 {
			t.Fatalf("chat:a+global counts %d", n)
		}
		if _, err := s.Search(ctx, vector.Query{Vector: embed("x")}); err == nil {
			t.Fatal("a search naming no scope was accepted")
		}
		if err := s.Upsert(ctx, []vector.Item{{ID: "z", Vector: embed("x")}}); err == nil {
			t.Fatal("an item without a scope was accepted")
		}
	})

	t.Run("UpsertReplaces", func(t *testing.T) {
		s := h(t)()
		upsert(t, s, item("chat:a", "n1", "d1", "the meeting is on tuesday"))
		upsert(t, s, item("chat:a", "n1", "d2", "the meeting moved to friday"))
		if n := count(t, s); n != 1 {
			t.Fatalf("%d items after replacing one", n)
		}
		hits := search(t, s, "meeting tuesday", 5, "chat:a")
		if len(hits) != 1 || hits[0].Text != "the meeting moved to friday" || hits[0].Document != "d2" {
			t.Fatalf("after replacing: %+v", hits)
		}
		want := vector.Dot(vector.Normalize(embed("meeting tuesday")), vector.Normalize(embed("the meeting moved to friday")))
		if d := hits[0].Score - want; d > 1e-4 || d < -1e-4 {
			t.Fatalf("score %v is the old vector's, want %v", hits[0].Score, want)
		}
	})

	t.Run("Delete", func(t *testing.T) {
		s := h(t)()
		upsert(t, s,
			item("chat:a", "1", "doc1", "alpha beta"),
			item("chat:a", "2", "doc1", "alpha gamma"),
			item("chat:a", "3", "doc2", "alpha delta"),
			item("chat:b", "1", "doc1", "alpha beta"),
		)
		search(t, s, "alpha", 10, "chat:a") // loaded before the deletes
		if n, err := s.Delete(ctx, "chat:a", "3", "missing"); err != nil || n != 1 {
			t.Fatalf("Delete = %d, %v; want 1", n, err)
		}
		if n, err := s.DeleteDocument(ctx, "chat:a", "doc1"); err != nil || n != 2 {
			t.Fatalf("DeleteDocument = %d, %v; want 2", n, err)
		}
		if hits := search(t, s, "alpha beta", 10, "chat:a"); len(hits) != 0 {
			t.Fatalf("deleted items found: %v", ids(hits))
		}
		if hits := search(t, s, "alpha beta", 10, "chat:b"); len(hits) != 1 {
			t.Fatalf("chat:b's doc1 went with chat:a's: %v", ids(hits))
		}
		upsert(t, s, item("chat:b", "2", "doc3", "omega"))
		if n, err := s.DeleteScope(ctx, "chat:b"); err != nil || n != 2 {
			t.Fatalf("DeleteScope = %d, %v; want 2", n, err)
		}
		if n := count(t, s); n != 0 {
			t.Fatalf("%d items left", n)
		}
		if n, err := s.Delete(ctx, "chat:a"); err != nil || n != 0 {
			t.Fatalf("Delete of no IDs = %d, %v", n, err)
		}
		// More IDs than one statement takes.
		var many []vector.Item
		var manyIDs []string
		for i := range 1200 {
			id := fmt.Sprint("m", i)
			many = append(many, vector.Item{ID: id, Scope: "chat:a", Vector: embed(fmt.Sprint("word", i%50, " other", i%7))})
			manyIDs = append(manyIDs, id)
		}
		upsert(t, s, many...)
		if n, err := s.Delete(ctx, "chat:a", manyIDs...); err != nil || n != len(many) {
			t.Fatalf("Delete of %d IDs = %d, %v", len(many), n, err)
		}
	})

	t.Run("Dimension", func(t *testing.T) {
		s := h(t)()
		upsert(t, s, item("global", "a", "", "first vector"))
		err := s.Upsert(ctx, []vector.Item{{ID: "b", Scope: "global", Vector: llmtest.Embed("other", Dim*2)}})
		if !errors.Is(err, vector.ErrDimension) {
			t.Fatalf("a %d-d vector in a %d-d store: err = %v, want ErrDimension", Dim*2, Dim, err)
		}
		_, err = s.Search(ctx, vector.Query{Scopes: []string{"global"}, Vector: llmtest.Embed("first", Dim/2)})
		if !errors.Is(err, vector.ErrDimension) {
			t.Fatalf("a %d-d query in a %d-d store: err = %v, want ErrDimension", Dim/2, Dim, err)
		}
		err = s.Upsert(ctx, []vector.Item{item("global", "c", "", "ok"), {ID: "d", Scope: "global", Vector: []float32{1, 2}}})
		if !errors.Is(err, vector.ErrDimension) {
			t.Fatalf("mixed lengths in one upsert: err = %v", err)
		}
		if n := count(t, s); n != 1 {
			t.Fatalf("a refused upsert stored something: %d items", n)
		}
		// Emptied, the store takes a new model's vectors.
		if _, err := s.DeleteScope(ctx, "global"); err != nil {
			t.Fatal(err)
		}
		if err := s.Upsert(ctx, []vector.Item{{ID: "b", Scope: "global", Vector: llmtest.Embed("other", Dim*2)}}); err != nil {
			t.Fatalf("an empty store refused a new dimension: %v", err)
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		s := h(t)()
		for name, it := range map[string]vector.Item{
			"zero vector":  {ID: "a", Scope: "global", Vector: make([]float32, Dim)},
			"empty vector": {ID: "a", Scope: "global"},
			"empty ID":     {Scope: "global", Vector: embed("x")},
		} {
			if err := s.Upsert(ctx, []vector.Item{item("global", "ok", "", "fine"), it}); err == nil {
				t.Errorf("%s accepted", name)
			}
		}
		if n := count(t, s); n != 0 {
			t.Fatalf("refused batches stored %d items", n)
		}
	})

	t.Run("OtherProcess", func(t *testing.T) {
		open := h(t)
		a, b := open(), open()
		upsert(t, a, item("chat:a", "1", "", "red apples"))
		if hits := search(t, b, "red apples", 5, "chat:a"); len(hits) != 1 {
			t.Fatalf("b does not see a's item: %v", ids(hits))
		}
		upsert(t, b, item("chat:a", "2", "", "green apples"), item("chat:a", "1", "", "yellow bananas"))
		hits := search(t, a, "green apples", 5, "chat:a")
		if len(hits) != 2 || hits[0].ID != "2" {
			t.Fatalf("a does not see b's upsert: %v", ids(hits))
		}
		if hits := search(t, a, "yellow bananas", 1, "chat:a"); hits[0].ID != "1" || hits[0].Score < 0.999 {
			t.Fatalf("a searches b's replaced item with its old vector: %+v", hits)
		}
		if _, err := b.Delete(ctx, "chat:a", "2"); err != nil {
			t.Fatal(err)
		}
		if hits := search(t, a, "green apples", 5, "chat:a"); len(hits) != 1 || hits[0].ID != "1" {
			t.Fatalf("a still finds b's deleted item: %v", ids(hits))
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		s := h(t)()
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				scope := fmt.Sprint("chat:", w%2)
				for i := range 10 {
					text := fmt.Sprintf("writer w%d note n%d", w, i)
					if err := s.Upsert(ctx, []vector.Item{{ID: fmt.Sprint(w, "-", i), Scope: scope, Text: text, Vector: embed(text)}}); err != nil {
						errs <- err
						return
					}
					hits, err := s.Search(ctx, vector.Query{Scopes: []string{scope}, Vector: embed(text), TopK: 1})
					if err != nil {
						errs <- err
						return
					}
					if len(hits) != 1 || hits[0].Text != text {
						errs <- fmt.Errorf("writer %d did not find its own note %d: %+v", w, i, hits)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if n := count(t, s); n != 40 {
			t.Fatalf("%d items, want 40", n)
		}
	})
}
