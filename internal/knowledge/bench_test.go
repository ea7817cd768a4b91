package knowledge_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/knowledge"
)

// BenchmarkSearch measures a hybrid top-5 search of one chat's scope
// plus the global one holding n chunks (about 700 characters each, words
// from a vocabulary of 5,000), the scripted model's 256-dimension
// vectors, on SQLite: the query's embedding (in process here), the
// vector scan, BM25 over the scope's keyword index and the fusion. The
// first search after a write rebuilds the keyword index: reported as
// index-ms.
//
//	go test -run '^$' -bench Search -benchtime 20x ./internal/knowledge/
func BenchmarkSearch(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			ctx := context.Background()
			calls := 0
			s, _ := openStore(b, "sqlite", func(context.Context) (knowledge.Embedder, error) { return hashEmbedder{&calls}, nil })
			r := rand.New(rand.NewPCG(29, uint64(n)))
			vocab := make([]string, 5000)
			for i := range vocab {
				vocab[i] = fmt.Sprintf("w%dx", i)
			}
			var doc strings.Builder
			for range n {
				for range 100 {
					doc.WriteString(vocab[r.IntN(len(vocab))] + " ")
				}
				doc.WriteString(".\n\n")
			}
			start := time.Now()
			d, err := s.Import(ctx, "global", "big.txt", []byte(doc.String()), nil)
			if err != nil {
				b.Fatal(err)
			}
			imported := time.Since(start)
			q := strings.Join([]string{vocab[1], vocab[20], vocab[300], vocab[4000]}, " ")
			start = time.Now()
			if _, err := s.SearchChat(ctx, "x", q, 5); err != nil {
				b.Fatal(err)
			}
			first := time.Since(start)
			b.ResetTimer()
			for b.Loop() {
				if _, err := s.SearchChat(ctx, "x", q, 5); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(d.Chunks), "chunks")
			b.ReportMetric(float64(imported.Milliseconds())/float64(d.Chunks)*1000, "import-ms/1k")
			b.ReportMetric(float64(first.Milliseconds()), "index-ms")
		})
	}
}
