package knowledge_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/knowledge"
	"github.com/nekro-go/nekro/internal/knowledge/knowledgetest"
	"github.com/nekro-go/nekro/internal/kv/kvtest"
	"github.com/nekro-go/nekro/internal/llm"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/vector"
)

// hashEmbedder embeds as the scripted model does (a bag of words).
type hashEmbedder struct{ calls *int }

func (h hashEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	*h.calls++
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = llmtest.Embed(t, llmtest.EmbeddingDimensions)
	}
	return out, nil
}

func openStore(t testing.TB, kind string, embed func(context.Context) (knowledge.Embedder, error)) (*knowledge.Store, vector.Store) {
	t.Helper()
	ctx := context.Background()
	open := kvtest.DatabaseOpener(t, kind)
	h := open()
	vs, err := vector.Open(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vs.Close() })
	s, err := knowledge.Open(ctx, h, knowledge.Options{Vectors: vs, Embedder: embed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, vs
}

func waitReady(t *testing.T, s *knowledge.Store, id string) knowledge.Document {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := s.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if d.Status == knowledge.StatusReady || d.Status == knowledge.StatusFailed || time.Now().After(deadline) {
			return d
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func sources(ps []knowledge.Passage) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.Source)
	}
	return strings.Join(s, ",")
}

func TestStore(t *testing.T) {
	for _, kind := range kvtest.DatabaseKinds {
		t.Run(kind, func(t *testing.T) { testStore(t, kind) })
	}
}

func testStore(t *testing.T, kind string) {
	ctx := context.Background()
	calls := 0
	s, vs := openStore(t, kind, func(context.Context) (knowledge.Embedder, error) { return hashEmbedder{&calls}, nil })

	pdf, err := s.Add(ctx, "chat:a", "zephyr.pdf", knowledgetest.PDF("Project Zephyr launches from pad 39.", "The launch code is 4711."))
	if err != nil {
		t.Fatal(err)
	}
	if pdf.Status != knowledge.StatusQueued || pdf.Scope != "chat:a" || pdf.Size == 0 {
		t.Fatalf("added: %+v", pdf)
	}
	docx, err := s.Add(ctx, "global", "handbook.docx", knowledgetest.DOCX("Holidays: every employee gets 30 days of holiday.", "猫咪喜欢吃鱼。"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{pdf.ID, docx.ID} {
		if d := waitReady(t, s, id); d.Status != knowledge.StatusReady || d.Chunks == 0 || d.Done != d.Chunks {
			t.Fatalf("import: %+v", d)
		}
	}

	ps, err := s.SearchChat(ctx, "a", "what is the launch code of Zephyr", 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) == 0 || ps[0].Source != "zephyr.pdf" || !strings.Contains(ps[0].Text, "4711") || ps[0].Score <= 0 || ps[0].Similarity <= 0 {
		t.Fatalf("chat a's search: %+v", ps)
	}
	ps, err = s.SearchChat(ctx, "b", "what is the launch code of Zephyr", 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.Scope != "global" {
			t.Fatalf("chat b found another chat's passage: %+v", p)
		}
	}
	// Chinese by keyword: the bigram 猫咪 is in the handbook.
	ps, err = s.SearchChat(ctx, "b", "猫咪", 3)
	if err != nil || len(ps) == 0 || ps[0].Source != "handbook.docx" {
		t.Fatalf("chinese: %+v %v", ps, err)
	}

	list, err := s.List(ctx, "")
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if list, _ := s.List(ctx, "chat:a"); len(list) != 1 || list[0].ID != pdf.ID {
		t.Fatalf("list chat:a: %+v", list)
	}

	if _, err := s.Delete(ctx, pdf.ID); err != nil {
		t.Fatal(err)
	}
	ps, _ = s.SearchChat(ctx, "a", "launch code Zephyr 4711", 5)
	if strings.Contains(sources(ps), "zephyr.pdf") {
		t.Fatalf("a deleted document is still found: %+v", ps)
	}
	if n, _ := vs.Count(ctx, "knowledge:chat:a"); n != 0 {
		t.Fatalf("%d vectors left of the deleted document", n)
	}
	if _, err := s.Delete(ctx, pdf.ID); !errors.Is(err, knowledge.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}

	// Failures: a file that is not what its name says; the document says
	// why and nothing of it is searchable.
	bad, err := s.Add(ctx, "chat:a", "broken.pdf", []byte("not a pdf"))
	if err != nil {
		t.Fatal(err)
	}
	if d := waitReady(t, s, bad.ID); d.Status != knowledge.StatusFailed || !strings.Contains(d.Error, "pdf") {
		t.Fatalf("broken pdf: %+v", d)
	}
	for _, sc := range []string{"", "chat:", "user:x", "globals"} {
		if _, err := s.Add(ctx, sc, "a.txt", []byte("x")); err == nil {
			t.Errorf("scope %q accepted", sc)
		}
	}
	if _, err := s.Add(ctx, "global", "a.exe", []byte("x")); !errors.Is(err, knowledge.ErrUnsupported) {
		t.Errorf("exe: %v", err)
	}

	// Erasing a chat's scope.
	z, err := s.Import(ctx, "chat:a", "kb.zip", knowledgetest.Zip(map[string][]byte{"x/notes.md": []byte("The secret garden is behind the library.")}), nil)
	if err != nil || z.Status != knowledge.StatusReady {
		t.Fatalf("zip import: %+v %v", z, err)
	}
	ps, _ = s.SearchChat(ctx, "a", "secret garden", 3)
	if len(ps) == 0 || ps[0].Source != "kb.zip/x/notes.md" {
		t.Fatalf("zip entry: %+v", ps)
	}
	if n, err := s.DeleteScope(ctx, "chat:a"); err != nil || n != 2 { // the zip and the failed pdf
		t.Fatalf("delete scope: %d %v", n, err)
	}
	if ps, _ = s.SearchChat(ctx, "a", "secret garden", 3); strings.Contains(sources(ps), "kb.zip") {
		t.Fatalf("found after the scope was erased: %+v", ps)
	}
	if n, _ := vs.Count(ctx, "knowledge:global"); n == 0 {
		t.Fatal("erasing a chat removed global vectors")
	}
}

// Without an embedding model, search is by keyword alone and imports say
// what is missing.
func TestNoEmbeddingModel(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, "sqlite", func(context.Context) (knowledge.Embedder, error) { return nil, llm.ErrNoEmbeddingModel })
	d, err := s.Import(ctx, "global", "a.txt", []byte("hello"), nil)
	if err == nil || d.Status != knowledge.StatusFailed || !strings.Contains(d.Error, "embedding") {
		t.Fatalf("import without a model: %+v %v", d, err)
	}
	if ps, err := s.SearchChat(ctx, "x", "hello", 3); err != nil || len(ps) != 0 {
		t.Fatalf("search: %+v %v", ps, err)
	}
}

// slowEmbedder holds every import until released.
type slowEmbedder struct{ release chan struct{} }

func (e slowEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	select {
	case <-e.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	calls := 0
	return hashEmbedder{&calls}.Embed(ctx, texts)
}

// Background imports run two at a time, the others queued; past the
// pending limit Add refuses; deleting a queued document ends its import.
func TestImportQueue(t *testing.T) {
	ctx := context.Background()
	release := make(chan struct{})
	s, _ := openStore(t, "sqlite", func(context.Context) (knowledge.Embedder, error) { return slowEmbedder{release}, nil })
	var ids []string
	for i := range 16 {
		d, err := s.Add(ctx, "global", fmt.Sprintf("f%d.txt", i), []byte(fmt.Sprintf("document number %d", i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, d.ID)
	}
	if _, err := s.Add(ctx, "global", "one-more.txt", []byte("x")); !errors.Is(err, knowledge.ErrBusy) {
		t.Fatalf("the 17th pending import: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	docs, _ := s.List(ctx, "global")
	queued := 0
	for _, d := range docs {
		if d.Status == knowledge.StatusQueued {
			queued++
		}
	}
	if queued != 14 {
		t.Fatalf("%d queued, want 14 (two running)", queued)
	}
	if _, err := s.Delete(ctx, ids[15]); err != nil {
		t.Fatal(err)
	}
	close(release)
	for _, id := range ids[:15] {
		if d := waitReady(t, s, id); d.Status != knowledge.StatusReady {
			t.Fatalf("%+v", d)
		}
	}
	if docs, _ := s.List(ctx, "global"); len(docs) != 15 {
		t.Fatalf("%d documents, want 15", len(docs))
	}
}

// A stored document's chunks overlap by the default overlap: a passage
// cut at a chunk's end is whole at the start of the next.
func TestStoredChunksOverlap(t *testing.T) {
	ctx := context.Background()
	calls := 0
	s, _ := openStore(t, "sqlite", func(context.Context) (knowledge.Embedder, error) { return hashEmbedder{&calls}, nil })
	var b strings.Builder
	for i := range 60 {
		fmt.Fprintf(&b, "Sentence number %d of the long handbook says something. ", i)
	}
	d, err := s.Add(ctx, "global", "long.txt", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if d = waitReady(t, s, d.ID); d.Status != knowledge.StatusReady {
		t.Fatalf("import: %+v", d)
	}
	chunks, err := s.Chunks(ctx, d.ID)
	if err != nil || len(chunks) < 2 {
		t.Fatalf("chunks: %d %v", len(chunks), err)
	}
	second := chunks[1].Text
	opening := second[:strings.Index(second, ". ")+1]
	if !strings.HasSuffix(strings.TrimSpace(chunks[0].Text), opening) && !strings.Contains(chunks[0].Text, opening+" ") {
		t.Fatalf("the second chunk's first sentence %q is not carried from the first chunk:\n%q", opening, chunks[0].Text)
	}
}
