package vector

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomIndex returns an index of n random unit vectors; with clusters >
// 0 they lie near that many centres, as embeddings of related texts do.
func randomIndex(r *rand.Rand, n, dim, clusters int) *scopeIndex {
	idx := &scopeIndex{dim: dim, pos: map[string]int{}}
	centres := make([][]float32, clusters)
	for c := range centres {
		centres[c] = make([]float32, dim)
		for j := range centres[c] {
			centres[c][j] = float32(r.NormFloat64())
		}
	}
	for i := range n {
		v := make([]float32, dim)
		for j := range v {
			v[j] = float32(r.NormFloat64())
		}
		if clusters > 0 {
			c := centres[r.IntN(clusters)]
			for j := range v {
				v[j] = c[j] + 0.3*v[j]
			}
		}
		idx.add(fmt.Sprint(i), Normalize(v))
	}
	return idx
}

// sortedScores returns the heap's scores, best first.
func sortedScores(h *topK[candidate]) []float32 {
	got := make([]float32, len(h.items))
	for i, c := range h.items {
		got[i] = c.score
	}
	slices.Sort(got)
	slices.Reverse(got)
	return got
}

func byScore(c candidate) float32 { return c.score }

// A scope large enough to be scanned in parallel parts finds the same
// top k, in the same order, as a serial scan and as sorting every score.
func TestScanInPartsFindsTheBest(t *testing.T) {
	const dim, k = 64, 25
	n := 3*parallelFloats/dim + 17 // several parts, uneven
	r := rand.New(rand.NewPCG(1, 2))
	idx := randomIndex(r, n, dim, 0)
	q := Normalize(idx.vecs[5*dim : 6*dim])

	par := &topK[candidate]{k: k, score: byScore}
	idx.scanExact("s", q, par)
	quant := &topK[candidate]{k: k, score: byScore}
	idx.scan("s", q, quant)
	serial := &topK[candidate]{k: k, score: byScore}
	idx.scanRange("s", q, 0, n, serial)

	all := make([]float32, n)
	for i := range n {
		all[i] = Dot(q, idx.vecs[i*dim:(i+1)*dim])
	}
	slices.Sort(all)
	slices.Reverse(all)

	for _, h := range []*topK[candidate]{par, quant, serial} {
		if got := sortedScores(h); !slices.Equal(got, all[:k]) {
			t.Fatalf("top %d scores %v, want %v", k, got, all[:k])
		}
	}
	if all[0] < 0.999 {
		t.Fatalf("the query's own vector scored %v", all[0])
	}
}

// The int8 prefilter returns exactly what the exact scan returns (the
// same IDs and scores: recall 1) on random and on clustered vectors, at
// dimensions that are and are not multiples of the unrolling, for small
// and large k, and computes exact scores for few vectors on random data.
func TestQuantisedScanIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 29))
	for _, tc := range []struct{ n, dim, clusters int }{
		{5000, 768, 0}, {5000, 768, 20}, {3000, 100, 0}, {3000, 37, 5}, {2000, 1536, 3}, {400, 8, 0},
	} {
		idx := randomIndex(r, tc.n, tc.dim, tc.clusters)
		for _, k := range []int{1, 10, 50} {
			rescored := 0
			const queries = 20
			for qi := range queries {
				var q []float32
				if qi%2 == 0 { // near a stored vector
					q = slices.Clone(idx.vecs[qi*tc.dim : (qi+1)*tc.dim])
					for j := range q {
						q[j] += 0.05 * float32(r.NormFloat64())
					}
				} else {
					q = make([]float32, tc.dim)
					for j := range q {
						q[j] = float32(r.NormFloat64())
					}
				}
				q = Normalize(q)
				exact := &topK[candidate]{k: k, score: byScore}
				idx.scanRange("s", q, 0, tc.n, exact)
				quant := &topK[candidate]{k: k, score: byScore}
				rescored += idx.scanQuantised("s", q, quant)
				if got, want := sortedScores(quant), sortedScores(exact); !slices.Equal(got, want) {
					t.Fatalf("n=%d dim=%d clusters=%d k=%d query %d: quantised scores %v, exact %v",
						tc.n, tc.dim, tc.clusters, k, qi, got, want)
				}
				ids := func(h *topK[candidate]) []string {
					var out []string
					for _, c := range h.items {
						out = append(out, c.id)
					}
					slices.Sort(out)
					return out
				}
				if got, want := ids(quant), ids(exact); !slices.Equal(got, want) {
					t.Fatalf("n=%d dim=%d clusters=%d k=%d query %d: quantised IDs %v, exact %v",
						tc.n, tc.dim, tc.clusters, k, qi, got, want)
				}
			}
			frac := float64(rescored) / float64(queries*tc.n)
			t.Logf("n=%d dim=%d clusters=%d k=%d: exact scores for %.2f%% of the vectors", tc.n, tc.dim, tc.clusters, k, 100*frac)
			if tc.clusters == 0 && tc.dim >= 100 && k <= 10 && frac > 0.05 {
				t.Errorf("n=%d dim=%d k=%d: the prefilter left %.1f%% of the vectors to score exactly", tc.n, tc.dim, k, 100*frac)
			}
		}
	}
}

// Replacing and removing vectors keeps the codes in step with the slab.
func TestQuantisedScanAfterChanges(t *testing.T) {
	const dim, k = 96, 10
	r := rand.New(rand.NewPCG(3, 4))
	idx := randomIndex(r, 2000, dim, 4)
	other := randomIndex(r, 500, dim, 0)
	for i := range 500 {
		idx.set(i*3, other.vecs[i*dim:(i+1)*dim])
	}
	for i := range 300 {
		idx.remove(fmt.Sprint(i * 5))
	}
	idx.add("new", other.vecs[:dim])
	for i := range idx.ids {
		want := &scopeIndex{dim: dim, pos: map[string]int{}}
		want.add("x", idx.vecs[i*dim:(i+1)*dim])
		if !slices.Equal(want.codes, idx.codes[i*dim:(i+1)*dim]) || want.scale[0] != idx.scale[i] || want.l1[0] != idx.l1[i] || want.resid[0] != idx.resid[i] {
			t.Fatalf("vector %d (%s): codes out of step with the slab", i, idx.ids[i])
		}
	}
	q := other.vecs[:dim]
	exact := &topK[candidate]{k: k, score: byScore}
	idx.scanRange("s", q, 0, len(idx.ids), exact)
	quant := &topK[candidate]{k: k, score: byScore}
	idx.scanQuantised("s", q, quant)
	if got, want := sortedScores(quant), sortedScores(exact); !slices.Equal(got, want) {
		t.Fatalf("quantised %v, exact %v", got, want)
	}
	if got := sortedScores(quant)[0]; got < 0.999 {
		t.Fatalf("the added vector scored %v", got)
	}
}
