package vector

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkScan measures the in-memory part of a top-10 search of one
// scope of 768-dimension random vectors, without the database: the exact
// scan of every float32 score against the int8 prefilter, both run on
// the same index in the same run.
//
//	go test -run '^$' -bench Scan -benchtime 20x ./internal/vector/
func BenchmarkScan(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		r := rand.New(rand.NewPCG(29, uint64(n)))
		idx := randomIndex(r, n, 768, 0)
		q := Normalize(randomIndex(r, 1, 768, 0).vecs)
		for _, kind := range []string{"exact", "int8"} {
			b.Run(fmt.Sprintf("%dk/%s", n/1000, kind), func(b *testing.B) {
				for b.Loop() {
					best := &topK[candidate]{k: 10, score: byScore}
					if kind == "exact" {
						idx.scanExact("global", q, best)
					} else {
						idx.scanQuantised("global", q, best)
					}
				}
			})
		}
	}
}
