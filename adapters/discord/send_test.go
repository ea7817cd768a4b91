package discord

import (
	"strings"
	"testing"
	"unicode/utf16"
)

// Parts never exceed the limit in UTF-16 units (so never in characters
// either), cut at a line break or space when one is near, and lose
// nothing but the whitespace at the cuts; blank text is one empty part.
func TestSplitText(t *testing.T) {
	emoji := strings.Repeat("🐱", 1500) // 3,000 units
	for _, c := range []struct {
		text  string
		parts int
	}{
		{"", 1}, {"  \n ", 1}, {"short", 1},
		{strings.Repeat("a", 2000), 1}, {strings.Repeat("a", 2001), 2},
		{emoji, 2},
		{strings.Repeat("line of text\n", 400), 3},
	} {
		parts := splitText(c.text, 2000)
		if len(parts) != c.parts {
			t.Errorf("%.20q...: %d parts, want %d", c.text, len(parts), c.parts)
		}
		for _, p := range parts {
			if n := len(utf16.Encode([]rune(p))); n > 2000 {
				t.Errorf("%.20q...: a part of %d units", c.text, n)
			}
			if strings.HasPrefix(p, "ine") || strings.HasSuffix(p, "lin") {
				t.Errorf("a part cut inside a word: %.20q...%q", p, p[max(0, len(p)-20):])
			}
		}
		if got, want := strings.Join(strings.Fields(strings.Join(parts, "")), ""), strings.Join(strings.Fields(c.text), ""); got != want {
			t.Errorf("%.20q...: text lost", c.text)
		}
	}
}
