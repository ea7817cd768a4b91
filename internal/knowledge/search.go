package knowledge

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nekro-go/nekro/internal/llm"
	"github.com/nekro-go/nekro/internal/vector"
)

// Search bounds.
const (
	DefaultTopK = 5
	MaxTopK     = 50
	// MaxQueryRunes is the longest query searched; a longer one is cut.
	MaxQueryRunes = 2000
	// rrfK is reciprocal rank fusion's constant: a chunk's fused score is
	// the sum over the rankings of 1/(rrfK + its rank).
	rrfK = 60
)

// Query is a search of the knowledge base.
type Query struct {
	// Scopes are the only scopes searched ("global", "chat:<key>"); at
	// least one.
	Scopes []string
	Text   string
	// TopK is the most passages returned, best first; 1..MaxTopK,
	// default DefaultTopK.
	TopK int
}

// chunkRef names a chunk.
type chunkRef struct {
	doc string
	seq int
}

// SearchChat searches what a chat may see: its own documents and the
// global ones.
func (s *Store) SearchChat(ctx context.Context, chatKey, text string, topK int) ([]Passage, error) {
	return s.Search(ctx, Query{Scopes: []string{"global", ChatScope(chatKey)}, Text: text, TopK: topK})
}

// Search ranks the ready documents' chunks of q.Scopes twice, by their
// vectors' similarity to the query's (when an embedding model is
// configured) and by BM25 over their words, and fuses the two rankings.
func (s *Store) Search(ctx context.Context, q Query) ([]Passage, error) {
	if len(q.Scopes) == 0 {
		return nil, errors.New("knowledge: a search names at least one scope")
	}
	for _, sc := range q.Scopes {
		if err := CheckScope(sc); err != nil {
			return nil, err
		}
	}
	if q.TopK == 0 {
		q.TopK = DefaultTopK
	}
	if q.TopK < 1 || q.TopK > MaxTopK {
		return nil, fmt.Errorf("knowledge: top_k must be 1 to %d, got %d", MaxTopK, q.TopK)
	}
	text := strings.TrimSpace(q.Text)
	if r := []rune(text); len(r) > MaxQueryRunes {
		text = string(r[:MaxQueryRunes])
	}
	if text == "" {
		return nil, errors.New("knowledge: empty query")
	}
	indexes, err := s.keywordIndexes(ctx, q.Scopes)
	if err != nil {
		return nil, err
	}
	texts := map[chunkRef]*Passage{}
	ready := map[string]bool{} // the documents a search may return
	for _, ix := range indexes {
		if len(ix.refs) > 0 {
			ready[ix.refs[0].doc] = true
		}
	}
	if len(ready) == 0 {
		return []Passage{}, nil
	}
	n := max(4*q.TopK, 20)
	fused := map[chunkRef]float64{}
	for rank, h := range bm25(indexes, Tokens(text), n) {
		fused[h.chunk] += 1.0 / float64(rrfK+rank+1)
	}
	hits, err := s.vectorSearch(ctx, q.Scopes, text, n)
	if err != nil {
		return nil, err
	}
	rank := 0
	for _, h := range hits {
		seq, err := strconv.Atoi(h.Metadata["seq"])
		if err != nil || !ready[h.Document] {
			continue // not searchable yet (an import in progress), or not ours
		}
		c := chunkRef{h.Document, seq}
		fused[c] += 1.0 / float64(rrfK+rank+1)
		rank++
		texts[c] = &Passage{Document: h.Document, Scope: strings.TrimPrefix(h.Scope, "knowledge:"), Source: h.Metadata["source"],
			Seq: seq, Text: h.Text, Similarity: float64(h.Score)}
	}
	ranked := make([]scored, 0, len(fused))
	for c, sc := range fused {
		ranked = append(ranked, scored{c, sc})
	}
	sortScored(ranked)
	if len(ranked) > q.TopK {
		ranked = ranked[:q.TopK]
	}
	best := 2.0 / float64(rrfK+1)
	out := make([]Passage, 0, len(ranked))
	for _, r := range ranked {
		p := texts[r.chunk]
		if p == nil {
			p = s.keywordPassage(indexes, r.chunk)
		}
		if p == nil {
			continue
		}
		p.Score = r.score / best
		out = append(out, *p)
	}
	return out, nil
}

// vectorSearch returns the n chunks nearest the query, or none when no
// embedding model is configured.
func (s *Store) vectorSearch(ctx context.Context, scopes []string, text string, n int) ([]vector.Hit, error) {
	if s.opts.Embedder == nil {
		return nil, nil
	}
	emb, err := s.opts.Embedder(ctx)
	if errors.Is(err, llm.ErrNoEmbeddingModel) {
		return nil, nil // keyword search alone
	}
	if err != nil {
		return nil, fmt.Errorf("knowledge: %w", err)
	}
	vecs, err := emb.Embed(ctx, []string{text})
	if err != nil {
		return nil, fmt.Errorf("knowledge: embed the query: %w", err)
	}
	if len(vecs) != 1 {
		return nil, fmt.Errorf("knowledge: the embedding model returned %d vectors for one query", len(vecs))
	}
	vs := make([]string, len(scopes))
	for i, sc := range scopes {
		vs[i] = vectorScope(sc)
	}
	hits, err := s.opts.Vectors.Search(ctx, vector.Query{Scopes: vs, Vector: vecs[0], TopK: n})
	if err != nil {
		return nil, fmt.Errorf("knowledge: %w", err)
	}
	return hits, nil
}

func (s *Store) keywordPassage(indexes []*keywordIndex, c chunkRef) *Passage {
	for _, ix := range indexes {
		if p, ok := ix.text[c]; ok {
			return &Passage{Document: c.doc, Scope: ix.scope, Source: p.source, Seq: c.seq, Text: p.text}
		}
	}
	return nil
}

// scopeIndex is the keyword indexes of one scope's ready documents, as
// of a generation of the scope.
type scopeIndex struct {
	gen  int64
	docs map[string]*keywordIndex // by document id
}

// keywordIndexes returns the keyword indexes of the scopes' ready
// documents. A scope whose generation in the database moved since it was
// read is read again: its list of ready documents, and the chunks of the
// documents not indexed yet (a document's chunks never change once it is
// ready, so the others are kept).
func (s *Store) keywordIndexes(ctx context.Context, scopes []string) ([]*keywordIndex, error) {
	var out []*keywordIndex
	seen := map[string]bool{}
	for _, sc := range scopes {
		if seen[sc] {
			continue
		}
		seen[sc] = true
		var gen int64
		err := s.read.QueryRowContext(ctx, `SELECT generation FROM knowledge_scopes WHERE scope = $1`, sc).Scan(&gen)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("knowledge: %w", err)
		}
		s.mu.Lock()
		si := s.index[sc]
		s.mu.Unlock()
		if si == nil || si.gen != gen {
			if si, err = s.loadScope(ctx, sc, gen, si); err != nil {
				return nil, err
			}
			s.mu.Lock()
			s.index[sc] = si
			s.mu.Unlock()
		}
		for _, ix := range si.docs {
			out = append(out, ix)
		}
	}
	return out, nil
}

func (s *Store) loadScope(ctx context.Context, scope string, gen int64, old *scopeIndex) (*scopeIndex, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT id FROM knowledge_documents WHERE scope = $1 AND status = $2`, scope, StatusReady)
	if err != nil {
		return nil, fmt.Errorf("knowledge: load %s: %w", scope, err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("knowledge: load %s: %w", scope, err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("knowledge: load %s: %w", scope, err)
	}
	si := &scopeIndex{gen: gen, docs: make(map[string]*keywordIndex, len(ids))}
	for _, id := range ids {
		if old != nil && old.docs[id] != nil {
			si.docs[id] = old.docs[id]
			continue
		}
		ix, err := s.loadDocIndex(ctx, scope, id)
		if err != nil {
			return nil, err
		}
		si.docs[id] = ix
	}
	return si, nil
}

func (s *Store) loadDocIndex(ctx context.Context, scope, id string) (*keywordIndex, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT seq, source, text FROM knowledge_chunks WHERE document = $1 ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("knowledge: load %s: %w", id, err)
	}
	defer rows.Close()
	var refs []chunkRef
	var texts []string
	stored := map[chunkRef]storedChunk{}
	for rows.Next() {
		c := chunkRef{doc: id}
		var sc storedChunk
		if err := rows.Scan(&c.seq, &sc.source, &sc.text); err != nil {
			return nil, fmt.Errorf("knowledge: load %s: %w", id, err)
		}
		refs = append(refs, c)
		texts = append(texts, sc.text)
		stored[c] = sc
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("knowledge: load %s: %w", id, err)
	}
	ix := newKeywordIndex(refs, texts)
	ix.scope, ix.text = scope, stored
	return ix, nil
}

type storedChunk struct {
	source, text string
}
