package knowledge

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Chunking defaults, in characters (runes): a chunk is at most
// DefaultChunkRunes long and starts with up to DefaultOverlapRunes of the
// chunk before it, so a passage cut at a boundary is whole in one of the
// two.
const (
	DefaultChunkRunes   = 800
	DefaultOverlapRunes = 120
)

// Chunk splits text into passages of at most size runes: paragraphs
// first, a paragraph too long by sentences (ended by . ! ? and the CJK
// 。！？；, or a line break), a sentence too long by size. Consecutive
// pieces are packed into a chunk while they fit; each chunk but the first
// begins with the last pieces of the one before, up to overlap runes.
func Chunk(text string, size, overlap int) []string {
	if size <= 0 {
		size = DefaultChunkRunes
	}
	if overlap < 0 || overlap >= size {
		overlap = size / 4
	}
	var pieces []piece
	for _, para := range splitParagraphs(text) {
		for i, s := range splitSentences(para, size) {
			pieces = append(pieces, piece{text: s, paraStart: i == 0})
		}
	}
	var chunks []string
	var cur []piece
	curLen, fresh := 0, 0 // fresh: pieces of cur not carried from the chunk before
	flush := func() {
		if len(cur) == 0 {
			return
		}
		chunks = append(chunks, joinPieces(cur))
		// Carry the tail into the next chunk.
		var keep []piece
		n := 0
		for i := len(cur) - 1; i >= 0; i-- {
			l := utf8.RuneCountInString(cur[i].text)
			if n+l > overlap {
				break
			}
			keep = append([]piece{cur[i]}, keep...)
			n += l
		}
		if len(keep) == len(cur) { // never carry a whole chunk: no progress
			keep, n = nil, 0
		}
		cur, curLen, fresh = keep, n, 0
	}
	for _, p := range pieces {
		l := utf8.RuneCountInString(p.text)
		if curLen+l+1 > size && curLen > 0 {
			before := len(chunks)
			flush()
			if len(chunks) > before && curLen+l+1 > size { // the overlap itself leaves no room
				cur, curLen = nil, 0
			}
		}
		cur = append(cur, p)
		curLen += l + 1
		fresh++
	}
	if fresh > 0 { // the last pieces, unless only the previous chunk's tail
		chunks = append(chunks, joinPieces(cur))
	}
	return chunks
}

type piece struct {
	text      string
	paraStart bool
}

func joinPieces(ps []piece) string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			switch {
			case p.paraStart:
				b.WriteString("\n\n")
			case endsCJK(ps[i-1].text) || startsCJK(p.text):
			default:
				b.WriteByte(' ')
			}
		}
		b.WriteString(p.text)
	}
	return b.String()
}

func splitParagraphs(text string) []string {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	var out []string
	for _, p := range strings.Split(text, "\n\n") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// splitSentences cuts a paragraph at sentence ends and line breaks, and
// any piece still longer than size into size-rune parts.
func splitSentences(para string, size int) []string {
	var out []string
	add := func(s string) {
		s = strings.TrimSpace(s)
		for utf8.RuneCountInString(s) > size {
			r := []rune(s)
			cut := size
			// Prefer a space near the end of the part.
			for i := size - 1; i > size*3/4; i-- {
				if unicode.IsSpace(r[i]) {
					cut = i
					break
				}
			}
			out = append(out, strings.TrimSpace(string(r[:cut])))
			s = strings.TrimSpace(string(r[cut:]))
		}
		if s != "" {
			out = append(out, s)
		}
	}
	if utf8.RuneCountInString(para) <= size {
		return []string{para}
	}
	start := 0
	rs := []rune(para)
	for i, r := range rs {
		end := false
		switch r {
		case '\n', '。', '！', '？', '；', '…':
			end = true
		case '.', '!', '?':
			end = i+1 == len(rs) || unicode.IsSpace(rs[i+1])
		}
		if end {
			add(string(rs[start : i+1]))
			start = i + 1
		}
	}
	add(string(rs[start:]))
	return out
}

// isCJK reports whether r is written without spaces between words: Han,
// kana, Hangul, and CJK punctuation.
func isCJK(r rune) bool {
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r) ||
		unicode.Is(unicode.Hangul, r) || (r >= 0x3000 && r <= 0x303F) || (r >= 0xFF00 && r <= 0xFFEF)
}

func endsCJK(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return isCJK(r)
}

func startsCJK(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return isCJK(r)
}
