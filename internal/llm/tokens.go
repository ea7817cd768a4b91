package llm

import (
	"strings"
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
	var c tokenCounter
	for i := 0; i < len(text); {
		if b := text[i]; b < utf8.RuneSelf {
			// ASCII, most of a prompt: a byte's class from the table,
			// and a run of one class read at once.
			cl := asciiClass[b]
			if cl == classOther {
				c.flush()
				c.n++
				i++
				continue
			}
			j := i + 1
			for j < len(text) && text[j] < utf8.RuneSelf && asciiClass[text[j]] == cl {
				j++
			}
			c.extend(cl, j-i)
			if cl == classSpace && strings.IndexByte(text[i:j], '\n') >= 0 {
				c.newline = true
			}
			i = j
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		switch {
		case isCJK(r):
			c.flush()
			c.n++
		case unicode.IsLetter(r) || unicode.IsMark(r):
			c.extend(classLetter, 1)
		case unicode.IsSpace(r):
			c.extend(classSpace, 1)
		default:
			c.flush()
			c.n += 2
		}
	}
	c.flush()
	return c.n
}

// Classes of runs that EstimateTokens counts together.
const (
	classNone   byte = iota
	classWord        // ASCII letters and '_'
	classDigit       // ASCII digits
	classSpace       // spaces, tabs, line breaks (and other Unicode spaces)
	classLetter      // letters and marks outside ASCII
	classOther       // an ASCII character that counts alone (punctuation)
)

// asciiClass is the class of each ASCII byte.
var asciiClass = func() (t [utf8.RuneSelf]byte) {
	for b := range t {
		switch {
		case b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b == '_':
			t[b] = classWord
		case b >= '0' && b <= '9':
			t[b] = classDigit
		case b == ' ' || b == '\t' || b == '\n' || b == '\r':
			t[b] = classSpace
		default:
			t[b] = classOther
		}
	}
	return t
}()

// tokenCounter is EstimateTokens's state: the tokens so far and the run
// of one class being read.
type tokenCounter struct {
	n       int
	run     int  // length of the current run
	class   byte // its class
	newline bool // a space run holds a line break
}

// extend adds n characters of class to the run, ending the run before
// when it is of another class.
func (c *tokenCounter) extend(class byte, n int) {
	if c.class != class {
		c.flush()
		c.class = class
	}
	c.run += n
}

func (c *tokenCounter) flush() {
	switch c.class {
	case classWord:
		c.n += (c.run + 5) / 6
	case classDigit, classLetter:
		c.n += (c.run + 2) / 3
	case classSpace:
		if c.newline || c.run > 1 {
			c.n++
		}
	}
	c.run, c.class, c.newline = 0, classNone, false
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
