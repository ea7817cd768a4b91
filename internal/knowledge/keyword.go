package knowledge

import (
	"math"
	"strings"
	"unicode"
)

// Tokens returns the keyword index's terms of a text: words of letters
// and digits, lowercased; text written without spaces (Chinese, Japanese,
// Korean) as overlapping pairs of characters (bigrams), and a single such
// character alone, so "知识库" matches "知识" and "识库" without a
// dictionary.
func Tokens(s string) []string {
	var out []string
	var word []rune
	var cjk []rune
	flushWord := func() {
		if len(word) > 0 {
			out = append(out, string(word))
			word = word[:0]
		}
	}
	flushCJK := func() {
		switch {
		case len(cjk) == 1:
			out = append(out, string(cjk))
		case len(cjk) > 1:
			for i := 0; i+1 < len(cjk); i++ {
				out = append(out, string(cjk[i:i+2]))
			}
		}
		cjk = cjk[:0]
	}
	for _, r := range strings.ToLower(s) {
		switch {
		case isCJK(r) && (unicode.IsLetter(r) || unicode.IsNumber(r)):
			flushWord()
			cjk = append(cjk, r)
		case unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r):
			flushCJK()
			word = append(word, r)
		default:
			flushWord()
			flushCJK()
		}
	}
	flushWord()
	flushCJK()
	return out
}

// BM25 parameters (the usual ones).
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// keywordDoc is one chunk in a keyword index.
type keywordDoc struct {
	chunk chunkRef
	terms map[string]int
	len   int
}

// keywordIndex is the chunks of one scope, tokenised.
type keywordIndex struct {
	scope string
	gen   int64
	text  map[chunkRef]storedChunk
	docs  []keywordDoc
	df    map[string]int // chunks holding each term
	tot   int            // all chunks' lengths, for the average
}

func newKeywordIndex(gen int64, chunks []chunkRef, texts []string) *keywordIndex {
	ix := &keywordIndex{gen: gen, df: map[string]int{}}
	for i, c := range chunks {
		toks := Tokens(texts[i])
		tf := map[string]int{}
		for _, t := range toks {
			tf[t]++
		}
		for t := range tf {
			ix.df[t]++
		}
		ix.docs = append(ix.docs, keywordDoc{chunk: c, terms: tf, len: len(toks)})
		ix.tot += len(toks)
	}
	return ix
}

// scored is a chunk and its score in one ranking.
type scored struct {
	chunk chunkRef
	score float64
}

// bm25 ranks the chunks of several scopes' indexes against the query
// terms as one collection (document frequencies summed), best first, at
// most n.
func bm25(indexes []*keywordIndex, query []string, n int) []scored {
	if len(query) == 0 {
		return nil
	}
	total, tot := 0, 0
	df := map[string]int{}
	uniq := map[string]bool{}
	for _, q := range query {
		uniq[q] = true
	}
	for _, ix := range indexes {
		total += len(ix.docs)
		tot += ix.tot
		for q := range uniq {
			df[q] += ix.df[q]
		}
	}
	if total == 0 {
		return nil
	}
	avg := float64(tot) / float64(total)
	if avg == 0 {
		avg = 1
	}
	idf := map[string]float64{}
	for q := range uniq {
		d := float64(df[q])
		idf[q] = math.Log(1 + (float64(total)-d+0.5)/(d+0.5))
	}
	h := &topK{k: n}
	for _, ix := range indexes {
		for _, d := range ix.docs {
			var s float64
			for q := range uniq {
				f := float64(d.terms[q])
				if f == 0 {
					continue
				}
				s += idf[q] * f * (bm25K1 + 1) / (f + bm25K1*(1-bm25B+bm25B*float64(d.len)/avg))
			}
			if s > 0 {
				h.push(scored{d.chunk, s})
			}
		}
	}
	return h.sorted()
}

// topK keeps the k best of what it is shown.
type topK struct {
	k     int
	items []scored
}

func (h *topK) push(x scored) {
	if len(h.items) < h.k {
		h.items = append(h.items, x)
		return
	}
	worst := 0
	for i, it := range h.items {
		if it.score < h.items[worst].score {
			worst = i
		}
	}
	if x.score > h.items[worst].score {
		h.items[worst] = x
	}
}

func (h *topK) sorted() []scored {
	out := append([]scored(nil), h.items...)
	sortScored(out)
	return out
}
