package telegram

import (
	"strings"
	"testing"
	"unicode/utf16"
)

// Parts stay within the limit as the API counts (UTF-16 units: an emoji
// is two), never split a surrogate pair, prefer line breaks and spaces,
// and lose nothing but the whitespace they were cut at.
func TestSplitText(t *testing.T) {
	cases := []string{
		strings.Repeat("a", 10000),
		strings.Repeat("😀", 3000),
		strings.Repeat("word ", 2000),
		strings.Repeat("line of text\n", 800),
		"short",
		"a" + strings.Repeat("😀", 2047) + "b",
	}
	for _, s := range cases {
		parts := splitText(s, maxText)
		var joined strings.Builder
		for _, p := range parts {
			if n := len(utf16.Encode([]rune(p))); n > maxText || n == 0 {
				t.Fatalf("part of %d units", n)
			}
			if strings.ContainsRune(p, '\uFFFD') {
				t.Fatalf("a surrogate pair was split")
			}
			joined.WriteString(p)
		}
		strip := strings.NewReplacer(" ", "", "\n", "")
		if strip.Replace(joined.String()) != strip.Replace(s) {
			t.Fatalf("text lost in %d parts", len(parts))
		}
		if strings.HasPrefix(s, "line") && !strings.HasSuffix(parts[0], "line of text") {
			t.Fatalf("not cut at a line break: %q", parts[0][len(parts[0])-20:])
		}
	}
	if got := splitText("", maxText); len(got) != 0 {
		t.Fatalf("empty text: %q", got)
	}
}

// Mentions are found by their entity, whose offsets count UTF-16 units
// (emoji before the mention shift them); a command addressed to the bot
// loses its @botname.
func TestReadEntities(t *testing.T) {
	me := botInfo{ID: 7, FirstName: "Nekko", Username: "nekko_bot"}
	text := "😀😀 hi @Nekko_Bot and @other"
	off := len(utf16.Encode([]rune("😀😀 hi ")))
	got, mention := readEntities(text, []entity{{Type: "mention", Offset: off, Length: 10}}, me)
	if !mention || got != text {
		t.Fatalf("mention: %v %q", mention, got)
	}
	other := len(utf16.Encode([]rune("😀😀 hi @Nekko_Bot and ")))
	if _, mention := readEntities(text, []entity{{Type: "mention", Offset: other, Length: 6}}, me); mention {
		t.Fatal("@other read as the bot")
	}
	// Byte offsets instead of UTF-16 ones would land elsewhere.
	if _, mention := readEntities(text, []entity{{Type: "mention", Offset: strings.Index(text, "@Nekko"), Length: 10}}, me); mention {
		t.Fatal("an entity at a byte offset matched")
	}
	if _, mention := readEntities("hey Nekko", []entity{{Type: "text_mention", Offset: 4, Length: 5, User: &user{ID: 7}}}, me); !mention {
		t.Fatal("text_mention of the bot")
	}
	got, mention = readEntities("/help@nekko_bot me", []entity{{Type: "bot_command", Offset: 0, Length: 15}}, me)
	if !mention || got != "/help me" {
		t.Fatalf("command: %v %q", mention, got)
	}
	if _, mention := readEntities("x", []entity{{Type: "mention", Offset: 0, Length: 99}}, me); mention {
		t.Fatal("an entity past the text")
	}
}
