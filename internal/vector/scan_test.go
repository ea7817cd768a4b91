package vector

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// A scope large enough to be scanned in parallel parts finds the same
// top k, in the same order, as a serial scan and as sorting every score.
func TestScanInPartsFindsTheBest(t *testing.T) {
	const dim, k = 64, 25
	n := 3*parallelFloats/dim + 17 // several parts, uneven
	r := rand.New(rand.NewPCG(1, 2))
	idx := &scopeIndex{dim: dim, pos: map[string]int{}}
	for i := range n {
		v := make([]float32, dim)
		for j := range v {
			v[j] = float32(r.NormFloat64())
		}
		id := fmt.Sprint(i)
		idx.pos[id] = i
		idx.ids = append(idx.ids, id)
		idx.vecs = append(idx.vecs, Normalize(v)...)
	}
	q := Normalize(idx.vecs[5*dim : 6*dim])
	score := func(c candidate) float32 { return c.score }

	par := &topK[candidate]{k: k, score: score}
	idx.scan("s", q, par)
	serial := &topK[candidate]{k: k, score: score}
	idx.scanRange("s", q, 0, n, serial)

	all := make([]float32, n)
	for i := range n {
		all[i] = Dot(q, idx.vecs[i*dim:(i+1)*dim])
	}
	slices.Sort(all)
	slices.Reverse(all)

	for _, h := range []*topK[candidate]{par, serial} {
		got := make([]float32, len(h.items))
		for i, c := range h.items {
			got[i] = c.score
		}
		slices.Sort(got)
		slices.Reverse(got)
		if !slices.Equal(got, all[:k]) {
			t.Fatalf("top %d scores %v, want %v", k, got, all[:k])
		}
	}
	if all[0] < 0.999 {
		t.Fatalf("the query's own vector scored %v", all[0])
	}
}
