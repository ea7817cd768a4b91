package knowledge

// PDF text through pdfcpu (github.com/pdfcpu/pdfcpu, pure Go, maintained):
// it reads the file's structure (cross references, object streams,
// filters, encryption without a password); the text objects of each
// page's content stream are read here, decoded through each font's
// ToUnicode map when it has one (how CJK and subset fonts say which
// characters their codes are), else as single-byte text.

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"
)

// Bounds of PDF reading: a stream's decoded bytes (a flate bomb stops
// there) and the pages read.
const (
	pdfMaxStream = 32 << 20
	pdfMaxPages  = 5000
)

// pdfcpu keeps a configuration directory unless told not to, once.
var disablePDFConfig = sync.OnceFunc(api.DisableConfigDir)

func pdfText(data []byte) (text string, err error) {
	defer func() { // a reader of hostile files: its panics are the file's errors
		if r := recover(); r != nil {
			text, err = "", fmt.Errorf("pdf: unreadable: %v", r)
		}
	}()
	disablePDFConfig()
	conf := model.NewDefaultConfiguration()
	conf.ValidationMode = model.ValidationRelaxed
	conf.Limits.MaxDecodeBytes = pdfMaxStream
	conf.Limits.MaxStreamBytes = MaxFileBytes
	ctx, err := api.ReadContext(bytes.NewReader(data), conf)
	if err != nil {
		return "", fmt.Errorf("pdf: %w", err)
	}
	if err := ctx.EnsurePageCount(); err != nil {
		return "", fmt.Errorf("pdf: %w", err)
	}
	if ctx.PageCount > pdfMaxPages {
		return "", fmt.Errorf("pdf: %d pages, more than %d", ctx.PageCount, pdfMaxPages)
	}
	var out strings.Builder
	for p := 1; p <= ctx.PageCount; p++ {
		d, _, inh, err := ctx.PageDict(p, false)
		if err != nil {
			return "", fmt.Errorf("pdf: page %d: %w", p, err)
		}
		content, err := pageContent(ctx.XRefTable, d)
		if err != nil {
			return "", fmt.Errorf("pdf: page %d: %w", p, err)
		}
		res := d
		if inh != nil && inh.Resources != nil {
			res = types.Dict{"Resources": inh.Resources}
		}
		fonts := pageFonts(ctx.XRefTable, res)
		out.WriteString(contentText(content, fonts))
		out.WriteString("\n\n")
	}
	return tidyLines(out.String()), nil
}

// pageContent returns a page's content streams, decoded, one after the
// other.
func pageContent(x *model.XRefTable, d types.Dict) ([]byte, error) {
	o, ok := d.Find("Contents")
	if !ok || o == nil {
		return nil, nil
	}
	o, err := x.Dereference(o)
	if err != nil || o == nil {
		return nil, err
	}
	var streams []types.Object
	switch o := o.(type) {
	case types.StreamDict:
		streams = []types.Object{o}
	case types.Array:
		streams = o
	default:
		return nil, errors.New("contents is neither a stream nor an array")
	}
	var b []byte
	for _, s := range streams {
		s, err := x.Dereference(s)
		if err != nil {
			return nil, err
		}
		sd, ok := s.(types.StreamDict)
		if !ok {
			continue
		}
		if err := sd.DecodeWithLimit(pdfMaxStream); err != nil {
			return nil, fmt.Errorf("content stream: %w", err)
		}
		if len(b)+len(sd.Content) > pdfMaxStream {
			return nil, fmt.Errorf("content streams over %d bytes", pdfMaxStream)
		}
		b = append(b, sd.Content...)
		b = append(b, '\n')
	}
	return b, nil
}

// pdfFont is what decoding a font's strings needs.
type pdfFont struct {
	codeLen int               // bytes per code: 1, or 2 for composite (Type0) fonts
	cmap    map[uint32]string // from its ToUnicode CMap; nil when none
}

func pageFonts(x *model.XRefTable, page types.Dict) map[string]*pdfFont {
	fonts := map[string]*pdfFont{}
	ro, ok := page.Find("Resources")
	if !ok {
		return fonts
	}
	res, err := x.DereferenceDict(ro)
	if err != nil || res == nil {
		return fonts
	}
	fo, ok := res.Find("Font")
	if !ok {
		return fonts
	}
	fd, err := x.DereferenceDict(fo)
	if err != nil || fd == nil {
		return fonts
	}
	for name, ref := range fd {
		f, err := x.DereferenceDict(ref)
		if err != nil || f == nil {
			continue
		}
		pf := &pdfFont{codeLen: 1}
		if st := f.NameEntry("Subtype"); st != nil && *st == "Type0" {
			pf.codeLen = 2
		}
		if tu, ok := f.Find("ToUnicode"); ok {
			if sd, _, err := x.DereferenceStreamDict(tu); err == nil && sd != nil {
				if err := sd.DecodeWithLimit(4 << 20); err == nil {
					pf.cmap, pf.codeLen = parseToUnicode(sd.Content, pf.codeLen)
				}
			}
		}
		fonts[name] = pf
	}
	return fonts
}

// parseToUnicode reads a ToUnicode CMap's bfchar and bfrange mappings,
// and the code length its codespace ranges use.
func parseToUnicode(b []byte, codeLen int) (map[uint32]string, int) {
	m := map[uint32]string{}
	lx := &pdfLexer{b: b}
	var ops []pdfToken
	mode := ""
	for {
		t, ok := lx.next()
		if !ok {
			break
		}
		if t.kind != tokOp {
			ops = append(ops, t)
			continue
		}
		switch t.s {
		case "begincodespacerange", "beginbfchar", "beginbfrange":
			mode, ops = t.s, nil
		case "endcodespacerange":
			if len(ops) >= 1 && ops[0].kind == tokString && len(ops[0].s) > 0 {
				codeLen = len(ops[0].s)
			}
			mode, ops = "", nil
		case "endbfchar":
			for i := 0; i+1 < len(ops); i += 2 {
				if ops[i].kind == tokString && ops[i+1].kind == tokString {
					m[code(ops[i].s)] = utf16BE(ops[i+1].s)
				}
			}
			mode, ops = "", nil
		case "endbfrange":
			for i := 0; i+2 < len(ops); i += 3 {
				lo, hi, dst := ops[i], ops[i+1], ops[i+2]
				if lo.kind != tokString || hi.kind != tokString {
					continue
				}
				a, z := code(lo.s), code(hi.s)
				if z < a || z-a > 0xFFFF {
					continue
				}
				switch dst.kind {
				case tokString:
					base := []rune(utf16BE(dst.s))
					if len(base) == 0 {
						continue
					}
					for c := a; c <= z; c++ {
						r := append([]rune(nil), base...)
						r[len(r)-1] += rune(c - a)
						m[c] = string(r)
					}
				case tokArray:
					for j, s := range dst.arr {
						if a+uint32(j) > z {
							break
						}
						m[a+uint32(j)] = utf16BE(s.s)
					}
				}
			}
			mode, ops = "", nil
		default:
			if mode == "" {
				ops = nil
			}
		}
	}
	return m, codeLen
}

func code(s string) uint32 {
	var c uint32
	for i := 0; i < len(s) && i < 4; i++ {
		c = c<<8 | uint32(s[i])
	}
	return c
}

func utf16BE(s string) string {
	u := make([]uint16, 0, len(s)/2)
	for i := 0; i+1 < len(s); i += 2 {
		u = append(u, uint16(s[i])<<8|uint16(s[i+1]))
	}
	return string(utf16.Decode(u))
}

// decode turns a string operand into text through the font.
func (f *pdfFont) decode(s string) string {
	if f == nil {
		return latin1(s)
	}
	if f.cmap == nil {
		if f.codeLen == 2 {
			return utf16BE(s)
		}
		return latin1(s)
	}
	var b strings.Builder
	for i := 0; i+f.codeLen <= len(s); i += f.codeLen {
		c := code(s[i : i+f.codeLen])
		if t, ok := f.cmap[c]; ok {
			b.WriteString(t)
		} else if f.codeLen == 1 {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func latin1(s string) string {
	r := make([]rune, len(s))
	for i := range len(s) {
		r[i] = rune(s[i])
	}
	return string(r)
}

// contentText follows a content stream's text operators: Tf chooses the
// font, Tj, TJ, ' and " show strings, and the moves (Td, TD, T*, Tm, ET)
// end a line when they go down.
func contentText(content []byte, fonts map[string]*pdfFont) string {
	lx := &pdfLexer{b: content}
	var out strings.Builder
	var operands []pdfToken
	var font *pdfFont
	newline := func() {
		if s := out.String(); len(s) > 0 && s[len(s)-1] != '\n' {
			out.WriteByte('\n')
		}
	}
	for {
		t, ok := lx.next()
		if !ok {
			break
		}
		if t.kind != tokOp {
			operands = append(operands, t)
			if len(operands) > 64 {
				operands = operands[1:]
			}
			continue
		}
		last := func(kind tokKind) (pdfToken, bool) {
			if len(operands) == 0 || operands[len(operands)-1].kind != kind {
				return pdfToken{}, false
			}
			return operands[len(operands)-1], true
		}
		switch t.s {
		case "Tf":
			if len(operands) >= 2 && operands[len(operands)-2].kind == tokName {
				font = fonts[operands[len(operands)-2].s]
			}
		case "Tj":
			if s, ok := last(tokString); ok {
				out.WriteString(font.decode(s.s))
			}
		case "'", "\"":
			newline()
			if s, ok := last(tokString); ok {
				out.WriteString(font.decode(s.s))
			}
		case "TJ":
			if a, ok := last(tokArray); ok {
				for _, e := range a.arr {
					switch e.kind {
					case tokString:
						out.WriteString(font.decode(e.s))
					case tokNumber:
						if n, err := strconv.ParseFloat(e.s, 64); err == nil && n < -200 {
							out.WriteByte(' ') // a wide gap between words
						}
					}
				}
			}
		case "Td", "TD":
			if len(operands) >= 2 {
				if ty, err := strconv.ParseFloat(operands[len(operands)-1].s, 64); err == nil && ty != 0 {
					newline()
				} else {
					out.WriteByte(' ')
				}
			}
		case "T*", "ET":
			newline()
		case "Tm":
			newline()
		case "BI":
			lx.skipInlineImage()
		}
		operands = operands[:0]
	}
	return out.String()
}

type tokKind int

const (
	tokOp tokKind = iota
	tokNumber
	tokName
	tokString
	tokArray
	tokOther
)

type pdfToken struct {
	kind tokKind
	s    string     // the operator, number, name (without /) or string's bytes
	arr  []pdfToken // an array's elements
}

// pdfLexer reads the tokens of a content stream or CMap (PDF 32000
// section 7.2): what text extraction needs, dictionaries skipped.
type pdfLexer struct {
	b     []byte
	i     int
	depth int
}

func isPDFSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == 0
}

func isPDFDelim(c byte) bool {
	return strings.IndexByte("()<>[]{}/%", c) >= 0
}

func (l *pdfLexer) next() (pdfToken, bool) {
	for l.i < len(l.b) {
		c := l.b[l.i]
		switch {
		case isPDFSpace(c):
			l.i++
		case c == '%':
			for l.i < len(l.b) && l.b[l.i] != '\n' && l.b[l.i] != '\r' {
				l.i++
			}
		case c == '(':
			return pdfToken{kind: tokString, s: l.literal()}, true
		case c == '<' && l.i+1 < len(l.b) && l.b[l.i+1] == '<':
			l.i += 2
			return pdfToken{kind: tokOther, s: "<<"}, true
		case c == '>' && l.i+1 < len(l.b) && l.b[l.i+1] == '>':
			l.i += 2
			return pdfToken{kind: tokOther, s: ">>"}, true
		case c == '<':
			return pdfToken{kind: tokString, s: l.hex()}, true
		case c == '[':
			l.i++
			if l.depth > 32 {
				return pdfToken{kind: tokOther}, true
			}
			l.depth++
			var arr []pdfToken
			for {
				t, ok := l.next()
				if !ok || (t.kind == tokOther && t.s == "]") {
					break
				}
				if len(arr) < 1<<16 {
					arr = append(arr, t)
				}
			}
			l.depth--
			return pdfToken{kind: tokArray, arr: arr}, true
		case c == ']':
			l.i++
			return pdfToken{kind: tokOther, s: "]"}, true
		case c == '/':
			l.i++
			start := l.i
			for l.i < len(l.b) && !isPDFSpace(l.b[l.i]) && !isPDFDelim(l.b[l.i]) {
				l.i++
			}
			return pdfToken{kind: tokName, s: string(l.b[start:l.i])}, true
		case c == '{' || c == '}' || c == '>' || c == ')':
			l.i++
		default:
			start := l.i
			for l.i < len(l.b) && !isPDFSpace(l.b[l.i]) && !isPDFDelim(l.b[l.i]) {
				l.i++
			}
			w := string(l.b[start:l.i])
			if _, err := strconv.ParseFloat(w, 64); err == nil {
				return pdfToken{kind: tokNumber, s: w}, true
			}
			return pdfToken{kind: tokOp, s: w}, true
		}
	}
	return pdfToken{}, false
}

// literal reads a (string) with its escapes and balanced parentheses.
func (l *pdfLexer) literal() string {
	l.i++ // (
	var b []byte
	depth := 1
	for l.i < len(l.b) {
		c := l.b[l.i]
		l.i++
		switch c {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return string(b)
			}
		case '\\':
			if l.i >= len(l.b) {
				return string(b)
			}
			e := l.b[l.i]
			l.i++
			switch e {
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'f':
				c = '\f'
			case '\r':
				if l.i < len(l.b) && l.b[l.i] == '\n' {
					l.i++
				}
				continue
			case '\n':
				continue
			default:
				if e >= '0' && e <= '7' {
					v := int(e - '0')
					for k := 0; k < 2 && l.i < len(l.b) && l.b[l.i] >= '0' && l.b[l.i] <= '7'; k++ {
						v = v*8 + int(l.b[l.i]-'0')
						l.i++
					}
					c = byte(v)
				} else {
					c = e
				}
			}
		}
		b = append(b, c)
	}
	return string(b)
}

// hex reads a <hex string>.
func (l *pdfLexer) hex() string {
	l.i++ // <
	var digits []byte
	for l.i < len(l.b) && l.b[l.i] != '>' {
		if c := l.b[l.i]; (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'f') {
			digits = append(digits, c)
		}
		l.i++
	}
	l.i++ // >
	if len(digits)%2 == 1 {
		digits = append(digits, '0')
	}
	out := make([]byte, len(digits)/2)
	for i := range out {
		v, _ := strconv.ParseUint(string(digits[2*i:2*i+2]), 16, 8)
		out[i] = byte(v)
	}
	return string(out)
}

// skipInlineImage moves past an inline image's data: from ID to the EI
// that ends it.
func (l *pdfLexer) skipInlineImage() {
	i := bytes.Index(l.b[l.i:], []byte("ID"))
	if i < 0 {
		l.i = len(l.b)
		return
	}
	l.i += i + 2
	for l.i < len(l.b) {
		j := bytes.Index(l.b[l.i:], []byte("EI"))
		if j < 0 {
			l.i = len(l.b)
			return
		}
		l.i += j + 2
		if isPDFSpace(l.b[l.i-3]) && (l.i >= len(l.b) || isPDFSpace(l.b[l.i]) || isPDFDelim(l.b[l.i])) {
			return
		}
	}
}
