// Package vector stores embedding vectors with their text and finds the
// nearest ones to a query, within scopes: the storage under the knowledge
// base and the long-term memory.
//
// Every item belongs to one scope ("global", "chat:<chat key>", later
// "user:..."), and a search names the scopes it may see: the store never
// returns an item of a scope the query did not name. Vectors are compared
// by cosine similarity; they are normalised when stored, so a score is a
// dot product in [-1, 1].
//
// Open returns the store in nekro's database (SQLite or PostgreSQL); the
// conformance suite every Store passes is vectortest.Run.
package vector

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// Limits the store enforces.
const (
	MaxDimensions = 16000 // the longest vector accepted
	MaxTopK       = 1000  // the most hits one search returns
	maxIDLen      = 512
	maxScopeLen   = 256
)

// ErrDimension is returned (wrapped, with both lengths) when a vector's
// length differs from the store's: every vector of a store comes from one
// embedding model, and vectors of two models cannot be compared.
var ErrDimension = errors.New("vector dimension mismatch")

// Item is one stored vector with what it was made from.
type Item struct {
	// ID names the item within its scope; upserting an existing (Scope,
	// ID) replaces it.
	ID    string
	Scope string
	// Document groups the items of one source (a file's chunks) so they
	// can be deleted together; may be empty.
	Document string
	Vector   []float32
	Text     string
	Metadata map[string]string
}

// Query is a similarity search.
type Query struct {
	// Scopes are the only scopes searched, e.g. {"global", "chat:x"};
	// at least one.
	Scopes []string
	Vector []float32
	// TopK is the most hits returned, best first; 1..MaxTopK, default 5.
	TopK int
}

// Hit is one item a search found.
type Hit struct {
	ID       string
	Scope    string
	Document string
	Text     string
	Metadata map[string]string
	Score    float32 // cosine similarity to the query
}

// Store keeps vectors by scope and searches them. Implementations are safe
// for concurrent use.
type Store interface {
	// Upsert adds items, replacing those with the same scope and ID. The
	// items are written all or none. A vector whose length differs from
	// the store's is refused with ErrDimension (the store takes the
	// length of its first vector, and a new one once it is empty).
	Upsert(ctx context.Context, items []Item) error
	// Delete removes the scope's items with these IDs and returns how
	// many there were.
	Delete(ctx context.Context, scope string, ids ...string) (int, error)
	// DeleteDocument removes the scope's items of one document.
	DeleteDocument(ctx context.Context, scope, document string) (int, error)
	// DeleteScope removes every item of a scope (a chat being erased).
	DeleteScope(ctx context.Context, scope string) (int, error)
	// Search returns the q.TopK items of q.Scopes most similar to
	// q.Vector, best first.
	Search(ctx context.Context, q Query) ([]Hit, error)
	// Count returns how many items the scopes hold, or the whole store
	// when none is named.
	Count(ctx context.Context, scopes ...string) (int, error)
	// Close releases what the store holds (not the database).
	Close() error
}

// checkScope reports whether s can name a scope.
func checkScope(s string) error {
	if s == "" {
		return errors.New("vector: empty scope")
	}
	if len(s) > maxScopeLen {
		return fmt.Errorf("vector: scope of %d bytes is longer than %d", len(s), maxScopeLen)
	}
	return nil
}

// normalized checks v and returns it scaled to length 1 (a copy).
func normalized(v []float32) ([]float32, error) {
	if len(v) == 0 {
		return nil, errors.New("vector: empty vector")
	}
	if len(v) > MaxDimensions {
		return nil, fmt.Errorf("vector: %d dimensions, more than %d", len(v), MaxDimensions)
	}
	var n float64
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, errors.New("vector: vector has a NaN or infinite component")
		}
		n += float64(x) * float64(x)
	}
	if n == 0 {
		return nil, errors.New("vector: zero vector (an empty text?) has no direction to compare")
	}
	inv := 1 / math.Sqrt(n)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) * inv)
	}
	return out, nil
}

// Dot returns the dot product of two vectors of the same length: the
// cosine similarity of normalised ones. It is the store's exact inner
// loop, unrolled by eight into independent accumulators (the compiler
// does not vectorise; eight keep more multiplies in flight than four).
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		aa, bb := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += aa[0] * bb[0]
		s1 += aa[1] * bb[1]
		s2 += aa[2] * bb[2]
		s3 += aa[3] * bb[3]
		s4 += aa[4] * bb[4]
		s5 += aa[5] * bb[5]
		s6 += aa[6] * bb[6]
		s7 += aa[7] * bb[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3) + (s4 + s5) + (s6 + s7)
}

// topK keeps the k best candidates seen, as a min-heap on score.
type topK[T any] struct {
	k     int
	items []T
	score func(T) float32
}

func (h *topK[T]) push(x T) {
	if len(h.items) < h.k {
		h.items = append(h.items, x)
		for i := len(h.items) - 1; i > 0; {
			p := (i - 1) / 2
			if h.score(h.items[p]) <= h.score(h.items[i]) {
				break
			}
			h.items[p], h.items[i] = h.items[i], h.items[p]
			i = p
		}
		return
	}
	if h.score(x) <= h.score(h.items[0]) {
		return
	}
	h.items[0] = x
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h.items) && h.score(h.items[l]) < h.score(h.items[m]) {
			m = l
		}
		if r < len(h.items) && h.score(h.items[r]) < h.score(h.items[m]) {
			m = r
		}
		if m == i {
			break
		}
		h.items[m], h.items[i] = h.items[i], h.items[m]
		i = m
	}
}

// full returns the lowest score kept once k are kept.
func (h *topK[T]) full() (float32, bool) {
	if len(h.items) < h.k {
		return 0, false
	}
	return h.score(h.items[0]), true
}

// Normalize returns v scaled to length 1 (a copy), or v itself when it is
// the zero vector.
func Normalize(v []float32) []float32 {
	n, err := normalized(v)
	if err != nil {
		return v
	}
	return n
}
