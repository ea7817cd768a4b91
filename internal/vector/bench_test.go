package vector_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/kv/kvtest"
	"github.com/nekro-go/nekro/internal/vector"
)

// benchDim is the length of common embedding models' vectors (e.g.
// multilingual e5-base, nomic-embed-text).
const benchDim = 768

func randomVectors(n int) [][]float32 {
	r := rand.New(rand.NewPCG(29, uint64(n)))
	out := make([][]float32, n)
	for i := range out {
		v := make([]float32, benchDim)
		for j := range v {
			v[j] = float32(r.NormFloat64())
		}
		out[i] = vector.Normalize(v)
	}
	return out
}

// BenchmarkSearch measures a top-10 search of one scope holding n chunks
// of 768 dimensions on each engine, with the load of the scope's index
// (the first search after a start or another process's write) reported as
// load-ms, and BenchmarkBaseline the plain Go loop over the same vectors.
//
//	go test -run '^$' -bench . -benchtime 20x ./internal/vector/
func BenchmarkSearch(b *testing.B) {
	for _, kind := range kvtest.DatabaseKinds {
		for _, n := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/%dk", kind, n/1000), func(b *testing.B) {
				ctx := context.Background()
				openDB := kvtest.DatabaseOpener(b, kind)
				s, err := vector.Open(ctx, openDB())
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				vecs := randomVectors(n)
				start := time.Now()
				for lo := 0; lo < n; lo += 1000 {
					items := make([]vector.Item, 0, 1000)
					for i := lo; i < min(lo+1000, n); i++ {
						items = append(items, vector.Item{ID: fmt.Sprint(i), Scope: "global", Document: fmt.Sprint("doc", i/20),
							Vector: vecs[i], Text: fmt.Sprintf("chunk %d of a document", i)})
					}
					if err := s.Upsert(ctx, items); err != nil {
						b.Fatal(err)
					}
				}
				insert := time.Since(start)
				// Another handle loads the scope from the database, as a
				// restarted server would.
				other, err := vector.Open(ctx, openDB())
				if err != nil {
					b.Fatal(err)
				}
				defer other.Close()
				q := vector.Query{Scopes: []string{"global", "chat:other"}, Vector: randomVectors(1)[0], TopK: 10}
				start = time.Now()
				if _, err := other.Search(ctx, q); err != nil {
					b.Fatal(err)
				}
				first := time.Since(start)
				b.ResetTimer()
				for b.Loop() {
					if _, err := other.Search(ctx, q); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(insert.Milliseconds())/float64(n)*1000, "insert-ms/1k")
				b.ReportMetric(float64(first.Milliseconds()), "first-search-ms")
			})
		}
	}
}

// BenchmarkBaseline is the floor a search cannot beat without an
// approximate index: a plain loop of dot products over [][]float32
// keeping the best 10, no database.
func BenchmarkBaseline(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			vecs := randomVectors(n)
			q := randomVectors(1)[0]
			for b.Loop() {
				best := make([]float32, 0, 11)
				for _, v := range vecs {
					var s float32
					for j := range v {
						s += q[j] * v[j]
					}
					if len(best) < 10 || s > best[len(best)-1] {
						i, _ := slices.BinarySearchFunc(best, s, func(a, t float32) int {
							if a > t {
								return -1
							}
							return 1
						})
						best = slices.Insert(best, i, s)
						if len(best) > 10 {
							best = best[:10]
						}
					}
				}
			}
		})
	}
}
