package note

import "strings"

// titleSimilarity is the reference's _title_similarity: the two titles
// without quote and 「」 decorations and surrounding spaces, compared as
// Python's difflib.SequenceMatcher(None, a, b).ratio() compares strings
// (code point by code point, with its autojunk heuristic), so the same
// pairs of titles are de-duplicated. The reference's source strips "'"
// twice, evidently meant as the curly quotes; both kinds are stripped here.
func titleSimilarity(a, b string) float64 {
	return ratio([]rune(cleanTitle(a)), []rune(cleanTitle(b)))
}

var titleDecorations = strings.NewReplacer("'", "", "\u2018", "", "\u2019", "", "「", "", "」", "")

func cleanTitle(s string) string { return strings.TrimSpace(titleDecorations.Replace(s)) }

// ratio is SequenceMatcher(None, a, b).ratio(): 2*M/T, where M is the
// number of elements in the matching blocks and T the total length.
func ratio(a, b []rune) float64 {
	if len(a)+len(b) == 0 {
		return 1
	}
	m := newMatcher(a, b)
	return 2 * float64(m.matches()) / float64(len(a)+len(b))
}

type matcher struct {
	a, b []rune
	b2j  map[rune][]int // positions of each element of b, popular ones left out
}

func newMatcher(a, b []rune) *matcher {
	m := &matcher{a: a, b: b, b2j: map[rune][]int{}}
	for j, r := range b {
		m.b2j[r] = append(m.b2j[r], j)
	}
	// autojunk: in a b of 200 or more elements, an element found more
	// than 1% of the time (+1) is "popular" and never starts a match.
	if n := len(b); n >= 200 {
		ntest := n/100 + 1
		for r, idx := range m.b2j {
			if len(idx) > ntest {
				delete(m.b2j, r)
			}
		}
	}
	return m
}

// longest is find_longest_match(alo, ahi, blo, bhi). With no junk
// function, bjunk is empty, so only the first two extension loops of
// difflib's can extend a match (over popular elements).
func (m *matcher) longest(alo, ahi, blo, bhi int) (besti, bestj, bestsize int) {
	besti, bestj = alo, blo
	j2len := map[int]int{}
	for i := alo; i < ahi; i++ {
		newj2len := map[int]int{}
		for _, j := range m.b2j[m.a[i]] {
			if j < blo {
				continue
			}
			if j >= bhi {
				break
			}
			k := j2len[j-1] + 1
			newj2len[j] = k
			if k > bestsize {
				besti, bestj, bestsize = i-k+1, j-k+1, k
			}
		}
		j2len = newj2len
	}
	for besti > alo && bestj > blo && m.a[besti-1] == m.b[bestj-1] {
		besti, bestj, bestsize = besti-1, bestj-1, bestsize+1
	}
	for besti+bestsize < ahi && bestj+bestsize < bhi && m.a[besti+bestsize] == m.b[bestj+bestsize] {
		bestsize++
	}
	return besti, bestj, bestsize
}

// matches sums the sizes of get_matching_blocks().
func (m *matcher) matches() int {
	type span struct{ alo, ahi, blo, bhi int }
	queue := []span{{0, len(m.a), 0, len(m.b)}}
	total := 0
	for len(queue) > 0 {
		s := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		i, j, k := m.longest(s.alo, s.ahi, s.blo, s.bhi)
		if k == 0 {
			continue
		}
		total += k
		if s.alo < i && s.blo < j {
			queue = append(queue, span{s.alo, i, s.blo, j})
		}
		if i+k < s.ahi && j+k < s.bhi {
			queue = append(queue, span{i + k, s.ahi, j + k, s.bhi})
		}
	}
	return total
}
