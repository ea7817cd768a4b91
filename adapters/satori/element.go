package satori

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// element is one node of Satori's message element markup: a text node
// (name "") or an element with attributes and children.
type element struct {
	name     string // "" for text
	text     string // a text node's text, unescaped
	attrs    map[string]string
	children []element
	raw      bool // while parsing: text still as written (entities, whitespace)
}

func (e element) attr(k string) string { return e.attrs[k] }

// frame is an element being parsed: its start tag as written, should it
// turn out unpaired.
type frame struct {
	el  element
	tag string
}

// add appends c to e's children, joining text still as written to the
// text before it, so the whitespace rule sees the whole run.
func (e *element) add(c element) {
	if n := len(e.children); c.raw && n > 0 && e.children[n-1].raw {
		e.children[n-1].text += c.text
		return
	}
	e.children = append(e.children, c)
}

// parseElements reads a message's content, Satori's XHTML-like element
// markup (the protocol's "Message Encoding"): text with entities
// (&amp; &lt; &gt; &quot; &apos; and numeric &#39; &#x27;), start, end
// and self-closing tags with attributes (key, key="v", key='v'), and
// comments, which are dropped. A start tag never closed, or an end tag
// never opened, is text, as the protocol says of unpaired tags. The
// leading and trailing whitespace of a text node is dropped when it
// holds a line break, as the protocol says too.
func parseElements(s string) []element {
	stack := []frame{{}}
	text := func(raw string) { stack[len(stack)-1].el.add(element{text: raw, raw: true}) }
	for len(s) > 0 {
		lt := strings.IndexByte(s, '<')
		if lt < 0 {
			text(s)
			break
		}
		if lt > 0 {
			text(s[:lt])
			s = s[lt:]
		}
		if strings.HasPrefix(s, "<!--") {
			if end := strings.Index(s[4:], "-->"); end >= 0 {
				s = s[4+end+3:]
				continue
			}
			text(escapeRaw(s))
			break
		}
		t, n, ok := readTag(s)
		if !ok {
			text("&lt;")
			s = s[1:]
			continue
		}
		written := s[:n]
		s = s[n:]
		switch {
		case t.end:
			i := len(stack) - 1
			for i > 0 && stack[i].el.name != t.name {
				i--
			}
			if i == 0 {
				text(escapeRaw(written)) // closes nothing open
				continue
			}
			for len(stack)-1 > i { // tags left open inside are text
				stack = unpaired(stack)
			}
			done := stack[len(stack)-1].el
			stack = stack[:len(stack)-1]
			stack[len(stack)-1].el.add(finish(done))
		case t.selfClosing:
			stack[len(stack)-1].el.add(element{name: t.name, attrs: t.attrs})
		default:
			stack = append(stack, frame{el: element{name: t.name, attrs: t.attrs}, tag: written})
		}
	}
	for len(stack) > 1 {
		stack = unpaired(stack)
	}
	return finish(stack[0].el).children
}

// unpaired turns the innermost open element into text in its parent:
// its start tag as written, then its children.
func unpaired(stack []frame) []frame {
	top := stack[len(stack)-1]
	stack = stack[:len(stack)-1]
	parent := &stack[len(stack)-1].el
	parent.add(element{text: escapeRaw(top.tag), raw: true})
	for _, c := range top.el.children {
		parent.add(c)
	}
	return stack
}

// escapeRaw makes markup written in the source read as text once decoded.
func escapeRaw(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// finish decodes the text nodes of e's children still as written
// (applying the whitespace rule) and drops those left empty.
func finish(e element) element {
	out := e.children[:0]
	for _, c := range e.children {
		if c.raw {
			c.text, c.raw = unescape(trimBreaks(c.text)), false
			if c.text == "" {
				continue
			}
		}
		out = append(out, c)
	}
	e.children = out
	return e
}

// trimBreaks drops the leading and the trailing whitespace of s when it
// holds a line break.
func trimBreaks(s string) string {
	isSpace := func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }
	if lead := len(s) - len(strings.TrimLeftFunc(s, isSpace)); strings.ContainsAny(s[:lead], "\n\r") {
		s = s[lead:]
	}
	if trail := strings.TrimRightFunc(s, isSpace); strings.ContainsAny(s[len(trail):], "\n\r") {
		s = trail
	}
	return s
}

// tag is a start, end or self-closing tag.
type tag struct {
	name             string
	attrs            map[string]string
	end, selfClosing bool
}

// readTag reads the tag at the start of s (which starts with '<'),
// returning its length; ok is false when s does not start with a tag.
func readTag(s string) (t tag, n int, ok bool) {
	i := 1
	if i < len(s) && s[i] == '/' {
		t.end = true
		i++
	}
	start := i
	for i < len(s) && nameByte(s[i], i == start) {
		i++
	}
	if i == start {
		return tag{}, 0, false
	}
	t.name = s[start:i]
	t.attrs = map[string]string{}
	for {
		for i < len(s) && isSpaceByte(s[i]) {
			i++
		}
		if i >= len(s) {
			return tag{}, 0, false
		}
		switch {
		case s[i] == '>':
			return t, i + 1, true
		case s[i] == '/' && i+1 < len(s) && s[i+1] == '>' && !t.end:
			t.selfClosing = true
			return t, i + 2, true
		case t.end:
			return tag{}, 0, false
		}
		ks := i
		for i < len(s) && !isSpaceByte(s[i]) && s[i] != '=' && s[i] != '>' && s[i] != '/' && s[i] != '<' && s[i] != '"' && s[i] != '\'' {
			i++
		}
		if i == ks {
			return tag{}, 0, false
		}
		key := s[ks:i]
		if i < len(s) && s[i] == '=' {
			i++
			if i >= len(s) || (s[i] != '"' && s[i] != '\'') {
				return tag{}, 0, false
			}
			q := s[i]
			end := strings.IndexByte(s[i+1:], q)
			if end < 0 {
				return tag{}, 0, false
			}
			t.attrs[key] = unescape(s[i+1 : i+1+end])
			i += end + 2
		} else {
			t.attrs[key] = ""
		}
	}
}

func nameByte(c byte, first bool) bool {
	letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	if first {
		return letter
	}
	return letter || c >= '0' && c <= '9' || c == '-' || c == '_' || c == ':' || c == '.'
}

func isSpaceByte(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

var entities = map[string]string{"amp": "&", "lt": "<", "gt": ">", "quot": `"`, "apos": "'", "nbsp": "\u00a0"}

// unescape decodes the entities of s; one it does not know stays as
// written.
func unescape(s string) string {
	if !strings.Contains(s, "&") {
		return s
	}
	var b strings.Builder
	for {
		amp := strings.IndexByte(s, '&')
		if amp < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:amp])
		s = s[amp:]
		semi := strings.IndexByte(s, ';')
		if semi < 0 || semi > 12 {
			b.WriteByte('&')
			s = s[1:]
			continue
		}
		ent := s[1:semi]
		if r, ok := entities[ent]; ok {
			b.WriteString(r)
			s = s[semi+1:]
			continue
		}
		if strings.HasPrefix(ent, "#") {
			num, base := ent[1:], 10
			if strings.HasPrefix(num, "x") || strings.HasPrefix(num, "X") {
				num, base = num[1:], 16
			}
			if v, err := strconv.ParseUint(num, base, 32); err == nil && num != "" && utf8.ValidRune(rune(v)) {
				b.WriteRune(rune(v))
				s = s[semi+1:]
				continue
			}
		}
		b.WriteByte('&')
		s = s[1:]
	}
}

// escape writes s as element text or an attribute value: nothing in it
// can read as a tag or an entity.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

// selfClosing writes an element without children, its attributes in the
// order given (pairs of key and value).
func selfClosing(name string, kv ...string) string {
	var b strings.Builder
	b.WriteString("<" + name)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			continue
		}
		b.WriteString(" " + kv[i] + `="` + escape(kv[i+1]) + `"`)
	}
	b.WriteString("/>")
	return b.String()
}
