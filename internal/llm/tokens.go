package llm

import (
	"unicode"
	"unicode/utf8"
)

// Token estimates: what a prompt costs in a model's context window,
// without the model's tokenizer (none is downloaded or shipped). The
// estimate follows how BPE tokenizers of the GPT family split text:
//
//   - an ASCII word costs one token per started 6 letters (common words
//     are one token: a space before a word is part of it);
//   - digits cost one token per started 3 (numbers are split in threes);
//   - each other ASCII character (punctuation, brackets, quotes) costs one;
//   - a single space costs nothing; a line break, or a run of spaces
//     (indentation), costs one;
//   - each CJK character (Han, kana, Hangul, CJK and full-width
//     punctuation) costs one;
//   - a word of other letters (Cyrillic, Greek, accented Latin...) costs
//     one token per started 3 letters; other symbols (emoji) cost two.
//
// Against the tokenizers of OpenAI's models (cl100k_base, o200k_base) it
// is within about a fifth for English prose and chat lines and code; for
// Chinese and Japanese it lies between the two (cl100k spends about 1.2
// tokens a character, o200k about 0.7). tokens_test.go lists the samples
// and the measured counts.

// ImageTokens is what one image in a prompt is counted as: OpenAI's cost
// of an image sent at low detail (85 tokens). An image sent at high
// detail may cost more; nekro sends the images plugins return as they
// are, so the reserve should leave room when a vision plugin is used.
const ImageTokens = 85

// Per-message overhead of the chat format: each message's role and
// delimiters, and the priming of the answer (OpenAI's published counting
// for its chat models).
const (
	messageTokens = 4
	replyTokens   = 3
)

// EstimateTokens returns the estimated tokens of text.
func EstimateTokens(text string) int {
	var (
		n       int
		run     int  // length of the current run of one class
		class   byte // the class of the run: 'a' ASCII letters, 'd' digits, 'w' whitespace, 'o' other letters
		newline bool // the whitespace run holds a line break
	)
	flush := func() {
		switch class {
		case 'a':
			n += (run + 5) / 6
		case 'd':
			n += (run + 2) / 3
		case 'o':
			n += (run + 2) / 3
		case 'w':
			if newline || run > 1 {
				n++
			}
		}
		run, class, newline = 0, 0, false
	}
	extend := func(c byte) {
		if class != c {
			flush()
			class = c
		}
		run++
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		switch {
		case r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_'):
			extend('a')
		case r >= '0' && r <= '9':
			extend('d')
		case r == ' ' || r == '\t' || r == '\n' || r == '\r':
			extend('w')
			if r == '\n' {
				newline = true
			}
		case r < utf8.RuneSelf:
			flush()
			n++
		case isCJK(r):
			flush()
			n++
		case unicode.IsLetter(r) || unicode.IsMark(r):
			extend('o')
		case unicode.IsSpace(r):
			extend('w')
		default:
			flush()
			n += 2
		}
	}
	flush()
	return n
}

// isCJK reports whether r is a Chinese, Japanese or Korean character, or
// CJK or full-width punctuation.
func isCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul) ||
		(r >= 0x3000 && r <= 0x303F) || (r >= 0xFF00 && r <= 0xFFEF)
}

// EstimateMessage returns the estimated tokens of one message of a
// request: its text, ImageTokens per image, and the format's overhead.
func EstimateMessage(m ChatMessage) int {
	n := messageTokens
	if m.Content.Parts == nil {
		return n + EstimateTokens(m.Content.Text)
	}
	for _, p := range m.Content.Parts {
		switch p.Type {
		case "text":
			n += EstimateTokens(p.Text)
		case "image_url":
			n += ImageTokens
		}
	}
	return n
}

// EstimatePrompt returns the estimated tokens of a request's messages,
// the priming of the answer included.
func EstimatePrompt(msgs []ChatMessage) int {
	n := replyTokens
	for _, m := range msgs {
		n += EstimateMessage(m)
	}
	return n
}
