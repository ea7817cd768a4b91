package satori

import (
	"strings"
	"testing"

	"github.com/nekro-go/nekro/adapter"
)

// show writes parsed elements back in a form easy to compare.
func show(els []element) string {
	var b strings.Builder
	for _, e := range els {
		if e.name == "" {
			b.WriteString("[" + e.text + "]")
			continue
		}
		b.WriteString("{" + e.name)
		for _, k := range []string{"id", "name", "type", "src", "title", "href"} {
			if v, ok := e.attrs[k]; ok {
				b.WriteString(" " + k + "=" + v)
			}
		}
		if len(e.children) > 0 {
			b.WriteString(" " + show(e.children))
		}
		b.WriteString("}")
	}
	return b.String()
}

// The protocol's markup: entities, tags with quoted and bare attributes,
// nesting, comments, unpaired tags as text, and line-break whitespace
// around text dropped.
func TestParseElements(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"hello", "[hello]"},
		{"a &amp; b &lt;c&gt; &quot;d&quot; &#39;e&#x27; &unknown; & f", `[a & b <c> "d" 'e' &unknown; & f]`},
		{`<at id="123" name="Nek &amp; ko"/> hi`, "{at id=123 name=Nek & ko}[ hi]"},
		{`<at type='all'/>`, "{at type=all}"},
		{`<img src="https://x/a.png?x=1&amp;y=2" title="a.png"/>`, "{img src=https://x/a.png?x=1&y=2 title=a.png}"},
		{`<quote id="9"><author id="1" name="bot"/>old</quote>new`, "{quote id=9 {author id=1 name=bot}[old]}[new]"},
		{"<b>bold <i>both</i></b>!", "{b [bold ]{i [both]}}[!]"},
		{"x<!-- note -->y", "[xy]"},
		{"1 < 2 and 3 > 2", "[1 < 2 and 3 > 2]"},
		{"<b>never closed", "[<b>never closed]"},
		{"closed </i> nothing", "[closed </i> nothing]"},
		{"<p>\n  line\n</p>", "{p [line]}"},
		{"keep  spaces ", "[keep  spaces ]"},
		{`<file src="data:text/plain;base64,aGk=" disabled/>`, "{file src=data:text/plain;base64,aGk=}"},
		{"<b>a<i>b</b>c", "{b [a<i>b]}[c]"},
	} {
		if got := show(parseElements(c.in)); got != c.want {
			t.Errorf("parse %q:\n got %s\nwant %s", c.in, got, c.want)
		}
	}
}

// Whatever the AI writes comes back as the same text, never an element.
func TestEscapeRoundTrip(t *testing.T) {
	for _, s := range []string{`<at id="all"/> everyone`, `<at type="all"/>`, "a & b", `&lt; stays`, `"quoted"`, "<img src=x/>", "</quote>", "<!-- c -->"} {
		els := parseElements(escape(s))
		if len(els) != 1 || els[0].name != "" || els[0].text != s {
			t.Errorf("escape %q: parsed back as %s", s, show(els))
		}
	}
	got := selfClosing("img", "src", `https://x/?a=1&b="2"`, "title", "")
	if got != `<img src="https://x/?a=1&amp;b=&quot;2&quot;"/>` {
		t.Errorf("selfClosing: %s", got)
	}
}

// Chat keys carry the Satori platform and the channel kind, split back
// exactly, belong to the satori adapter's namespace, and keep any
// channel id (QQ's private:123, Matrix's !room:server, Telegram's -100...).
func TestChatKey(t *testing.T) {
	for _, c := range []struct {
		platform string
		private  bool
		channel  string
	}{
		{"discord", false, "123"}, {"qq", true, "ABCDEF"}, {"onebot", true, "private:10001"},
		{"matrix", false, "!room:example.org"}, {"telegram", false, "-1001234"}, {"wechat-official", true, "o-x_group_y"}, {"qq", true, "a-group_b"}, {"qq", false, "a-private_b"},
	} {
		key := chatKey(c.platform, c.private, c.channel)
		p, priv, ch, ok := splitChatKey(key)
		if !ok || p != c.platform || priv != c.private || ch != c.channel {
			t.Errorf("%s: split as %q %v %q %v", key, p, priv, ch, ok)
		}
		if pl, _, ok := adapter.SplitChatKey(key); !ok || pl != Platform {
			t.Errorf("%s: adapter.SplitChatKey gives %q", key, pl)
		}
	}
	if got := chatKey("discord", true, "5"); got != "satori-discord-private_5" {
		t.Errorf("chat key %s", got)
	}
	for _, bad := range []string{"satori-discord", "satori-discord-group_", "satori--group_1", "discord-group_1", "satori-group_1"} {
		if _, _, _, ok := splitChatKey(bad); ok {
			t.Errorf("%s split", bad)
		}
	}
}

func TestDecodeDataURL(t *testing.T) {
	if mt, b, ok := decodeDataURL("data:image/png;base64,iVBORw=="); !ok || mt != "image/png" || len(b) != 4 {
		t.Errorf("base64: %q %v %v", mt, b, ok)
	}
	if mt, b, ok := decodeDataURL("data:text/plain;charset=utf-8,a%20b"); !ok || mt != "text/plain" || string(b) != "a b" {
		t.Errorf("percent: %q %q %v", mt, b, ok)
	}
	if _, _, ok := decodeDataURL("data:;base64,@@@"); ok {
		t.Error("bad base64 read")
	}
}
