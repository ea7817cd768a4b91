package llm

import (
	"strings"
	"testing"

	"github.com/nekro-go/nekro/plugin"
)

// tokenSamples are texts with their tokens as OpenAI's tokenizers count
// them (cl100k_base of GPT-4 and GPT-3.5, o200k_base of GPT-4o),
// measured once with a BPE tokenizer outside this repository: nekro
// ships no tokenizer, this table is how its estimate is checked.
var tokenSamples = []struct {
	text          string
	cl100k, o200k int
	lowPct, hiPct int // the estimate's allowed error against the nearer count, percent
}{
	{"The quick brown fox jumps over the lazy dog, and then it runs back home to sleep.", 19, 19, -20, 20},
	{"Please remind me tomorrow at 9 am to call the dentist about my appointment.", 16, 16, -20, 25},
	{`send_msg_text(_ck, "Hello! Here is the result: 42 apples and 17 oranges.")`, 22, 22, -20, 20},
	{`[#123 2026-11-25 22:30:00] "Alice" (user id 12345): can you summarize what we said about the trip to Kyoto?`, 38, 38, -20, 20},
	{"今天天气很好，我们一起去公园散步吧。你觉得怎么样？", 31, 17, -20, 50},
	{"我想知道这个插件是怎么工作的，请帮我解释一下它的配置项。", 31, 18, -20, 60},
	{"こんにちは、今日はとても良い天気ですね。一緒に散歩しませんか？", 32, 19, -20, 60},
	{"안녕하세요, 오늘 날씨가 정말 좋네요. 같이 산책할까요?", 37, 17, -40, 50},
	{"Привет, как дела? Сегодня отличная погода для прогулки по парку.", 28, 18, -20, 40},
	{`def fib(n):\n    return n if n < 2 else fib(n-1) + fib(n-2)\nprint([fib(i) for i in range(10)])`, 38, 39, -20, 20},
}

// The estimate stays near what the models' tokenizers count: within a
// fifth for English and code, between the two tokenizers' counts (or
// near one) for CJK.
func TestEstimateTokensSamples(t *testing.T) {
	for _, s := range tokenSamples {
		got := EstimateTokens(s.text)
		lo, hi := min(s.cl100k, s.o200k), max(s.cl100k, s.o200k)
		var errPct int
		switch {
		case got < lo:
			errPct = (got - lo) * 100 / lo
		case got > hi:
			errPct = (got - hi) * 100 / hi
		}
		t.Logf("%3d estimated, cl100k %3d, o200k %3d, error %+d%%: %.40s", got, s.cl100k, s.o200k, errPct, s.text)
		if errPct < s.lowPct || errPct > s.hiPct {
			t.Errorf("%q: estimated %d, tokenizers count %d and %d: error %d%% outside [%d%%, %d%%]",
				s.text, got, s.cl100k, s.o200k, errPct, s.lowPct, s.hiPct)
		}
	}
}

func TestEstimateTokensEdges(t *testing.T) {
	if n := EstimateTokens(""); n != 0 {
		t.Errorf("empty: %d", n)
	}
	// A long text grows linearly: the estimate of a repeated text is the
	// sum of its parts (no run crosses them: each ends in a line break).
	line := "Hello, world: 1234567 things.\n"
	if one, many := EstimateTokens(line), EstimateTokens(strings.Repeat(line, 100)); many != 100*one {
		t.Errorf("100 lines: %d, one line: %d", many, one)
	}
	// Bytes that are not UTF-8 count, and do not panic.
	if n := EstimateTokens("\xff\xfe"); n <= 0 {
		t.Errorf("invalid UTF-8: %d", n)
	}
}

// The estimate of edge cases, pinned: runs of each class, mixed scripts,
// invalid UTF-8, control bytes (the values EstimateTokens gave when its
// ASCII bytes were first read from a table, which must not change them).
func TestEstimateTokensPinned(t *testing.T) {
	for _, c := range []struct {
		text string
		want int
	}{
		{"", 0},
		{" ", 0},
		{"  ", 1},
		{"\n", 1},
		{" \n ", 1},
		{"\t\t", 1},
		{"a", 1},
		{"ab_cd", 1},
		{"abcdefg", 2},
		{"1234567", 3},
		{"a1b2c3", 6},
		{"x  y   z\n\n", 6},
		{"\r\n\r\n", 1},
		{"Hello, world: 1234567 things.\n", 10},
		{"\xff\xfe", 4},
		{"a\xffb", 4},
		{"é", 1},
		{"café au lait", 4},
		{"naïve—résumé", 9},
		{"🙂🙂 ok", 5},
		{"中文English混合123", 7},
		{"  indented\n    more\n\tline", 7},
		{"()[]{}<>!@#$%^&*", 16},
		{"ÀÉÎÕÜ", 2},
		{"\u00a0nbsp\u2003em", 2},
		{"ﾊﾝｶｸ", 4},
		{"、。「」", 4},
		{"ｆｕｌｌ", 4},
		{"Ελληνικά κείμενο", 6},
		{"עברית", 2},
		{"العربية", 3},
		{"हिन्दी", 2},
		{"a\u0301b", 3},
		{"\u200b\u200c", 4},
		{"x\x00y", 3},
		{"tab\there", 2},
	} {
		if got := EstimateTokens(c.text); got != c.want {
			t.Errorf("%q: %d tokens, want %d", c.text, got, c.want)
		}
	}
}

// BenchmarkEstimateTokens estimates a prompt-sized text as a turn's
// prompt holds them: English instructions, code and chat lines, with a
// CJK line now and then.
func BenchmarkEstimateTokens(b *testing.B) {
	var sb strings.Builder
	for round := 0; sb.Len() < 32<<10; round++ {
		for _, s := range tokenSamples {
			if ascii := strings.IndexFunc(s.text, func(r rune) bool { return r >= 0x80 }) < 0; ascii || round%8 == 0 {
				sb.WriteString(s.text)
				sb.WriteByte('\n')
			}
		}
	}
	text := sb.String()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		EstimateTokens(text)
	}
}

// Images count ImageTokens each; every message adds its overhead.
func TestEstimatePrompt(t *testing.T) {
	text := TextMessage("user", "hello")
	if got, want := EstimatePrompt([]ChatMessage{text}), replyTokens+messageTokens+1; got != want {
		t.Errorf("one message: %d, want %d", got, want)
	}
	img := ChatMessage{Role: "user", Content: Content{Parts: []plugin.ContentPart{
		plugin.TextPart("hello"), plugin.ImagePart("data:image/png;base64,AAAA"), plugin.ImagePart("https://example.invalid/a.png"),
	}}}
	if got, want := EstimateMessage(img), messageTokens+1+2*ImageTokens; got != want {
		t.Errorf("text and two images: %d, want %d", got, want)
	}
}
