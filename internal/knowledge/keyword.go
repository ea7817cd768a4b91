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

// posting is one chunk holding a term: its place in the index and how
// often the term occurs in it.
type posting struct {
	chunk int32
	tf    int32
}

// keywordIndex is the chunks of one document, tokenised into an inverted
// index: a search reads only the postings of its terms.
type keywordIndex struct {
	scope string
	text  map[chunkRef]storedChunk
	refs  []chunkRef
	lens  []int                // each chunk's number of terms
	post  map[string][]posting // chunks by term
	tot   int                  // all chunks' lengths, for the average
}

func newKeywordIndex(chunks []chunkRef, texts []string) *keywordIndex {
	ix := &keywordIndex{refs: chunks, lens: make([]int, len(chunks)), post: map[string][]posting{}}
	for i := range chunks {
		toks := Tokens(texts[i])
		tf := map[string]int32{}
		for _, t := range toks {
			tf[t]++
		}
		for t, n := range tf {
			ix.post[t] = append(ix.post[t], posting{int32(i), n})
		}
		ix.lens[i] = len(toks)
		ix.tot += len(toks)
	}
	return ix
}

// scored is a chunk and its score in one ranking.
type scored struct {
	chunk chunkRef
	score float64
}

// bm25 ranks the chunks of several documents' indexes against the query
// terms as one collection, best first, at most n.
func bm25(indexes []*keywordIndex, query []string, n int) []scored {
	if len(query) == 0 {
		return nil
	}
	uniq := map[string]bool{}
	for _, q := range query {
		uniq[q] = true
	}
	total, tot := 0, 0
	df := map[string]int{}
	for _, ix := range indexes {
		total += len(ix.refs)
		tot += ix.tot
		for q := range uniq {
			df[q] += len(ix.post[q])
		}
	}
	if total == 0 {
		return nil
	}
	avg := float64(tot) / float64(total)
	if avg == 0 {
		avg = 1
	}
	scores := map[chunkRef]float64{}
	for q := range uniq {
		d := float64(df[q])
		if d == 0 {
			continue
		}
		idf := math.Log(1 + (float64(total)-d+0.5)/(d+0.5))
		for _, ix := range indexes {
			for _, p := range ix.post[q] {
				f := float64(p.tf)
				scores[ix.refs[p.chunk]] += idf * f * (bm25K1 + 1) / (f + bm25K1*(1-bm25B+bm25B*float64(ix.lens[p.chunk])/avg))
			}
		}
	}
	h := &topK{k: n}
	for c, s := range scores {
		h.push(scored{c, s})
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
