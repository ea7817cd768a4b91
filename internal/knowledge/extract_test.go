package knowledge_test

import (
	"archive/zip"
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/knowledge"
	"github.com/nekro-go/nekro/internal/knowledge/knowledgetest"
)

func one(t *testing.T, name string, data []byte) string {
	t.Helper()
	srcs, err := knowledge.Extract(name, data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(srcs) != 1 || srcs[0].Name != name {
		t.Fatalf("%s: sources %+v", name, srcs)
	}
	return srcs[0].Text
}

func TestExtractFormats(t *testing.T) {
	if got := one(t, "a.txt", []byte("\xef\xbb\xbfhello\xffworld")); got != "hello\uFFFDworld" {
		t.Errorf("txt: %q", got)
	}
	if got := one(t, "a.md", []byte("# Title\n\nbody")); got != "# Title\n\nbody" {
		t.Errorf("md: %q", got)
	}
	html := `<html><head><title>T</title><style>p{}</style><script>var secret=1</script></head>
<body><h1>Head</h1><p>One <b>bold</b> word.</p><ul><li>a</li><li>b</li></ul></body></html>`
	if got := one(t, "a.html", []byte(html)); got != "T\n\nHead\n\nOne bold word.\n\na\n\nb" {
		t.Errorf("html: %q", got)
	}
	if got := one(t, "a.csv", []byte("name,city\nAda,London\nLin,\"Bei, jing\"\n")); got != "name: Ada; city: London\n\nname: Lin; city: Bei, jing\n\n" {
		t.Errorf("csv: %q", got)
	}
	if got := one(t, "a.pdf", knowledgetest.PDF("The launch code is (4711).", `back\slash`)); got != "The launch code is (4711).\nback\\slash" {
		t.Errorf("pdf: %q", got)
	}
	if got := one(t, "a.docx", knowledgetest.DOCX("First <para> & more", "Second")); got != "First <para> & more\n\nSecond" {
		t.Errorf("docx: %q", got)
	}
	if _, err := knowledge.Extract("a.exe", []byte("MZ")); !errors.Is(err, knowledge.ErrUnsupported) {
		t.Errorf("exe: %v", err)
	}
	if _, err := knowledge.Extract("big.txt", make([]byte, knowledge.MaxFileBytes+1)); !errors.Is(err, knowledge.ErrTooLarge) {
		t.Errorf("a file over the limit: %v", err)
	}
	if _, err := knowledge.Extract("a.pdf", []byte("%PDF-1.4 not really")); err == nil {
		t.Error("a broken PDF was read")
	}
}

// A PDF whose font maps two-byte codes to Chinese through a ToUnicode
// CMap, as CJK PDFs do.
func TestExtractPDFToUnicode(t *testing.T) {
	cmap := "/CIDInit /ProcSet findresource begin 12 dict begin begincmap\n1 begincodespacerange <0000> <FFFF> endcodespacerange\n" +
		"2 beginbfchar <0001> <77E5> <0002> <8BC6> endbfchar\n1 beginbfrange <0010> <0011> <5E93> endbfrange\nendcmap end end\n"
	content := "BT /F1 12 Tf 72 720 Td <000100020010> Tj ET\n"
	pdf := rawPDF([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
		"<< /Type /Font /Subtype /Type0 /BaseFont /X /Encoding /Identity-H /ToUnicode 6 0 R /DescendantFonts [] >>",
		streamObj(content),
		streamObj(cmap),
	})
	if got := one(t, "cjk.pdf", pdf); got != "知识库" {
		t.Errorf("cjk pdf: %q", got)
	}
}

func streamObj(s string) string {
	return "<< /Length " + fmtInt(len(s)) + " >>\nstream\n" + s + "endstream"
}

func fmtInt(n int) string { return strconv.Itoa(n) }

func rawPDF(objs []string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offs := []int{}
	for i, o := range objs {
		offs = append(offs, b.Len())
		b.WriteString(fmtInt(i+1) + " 0 obj\n" + o + "\nendobj\n")
	}
	x := b.Len()
	b.WriteString("xref\n0 " + fmtInt(len(objs)+1) + "\n0000000000 65535 f \n")
	for _, o := range offs {
		s := fmtInt(o)
		b.WriteString(strings.Repeat("0", 10-len(s)) + s + " 00000 n \n")
	}
	b.WriteString("trailer\n<< /Size " + fmtInt(len(objs)+1) + " /Root 1 0 R >>\nstartxref\n" + fmtInt(x) + "\n%%EOF\n")
	return b.Bytes()
}

func TestExtractZip(t *testing.T) {
	inner := knowledgetest.Zip(map[string][]byte{"deep.txt": []byte("inner text")})
	z := knowledgetest.Zip(map[string][]byte{
		"docs/a.md":     []byte("alpha"),
		"docs/b.pdf":    knowledgetest.PDF("bravo"),
		"c.docx":        knowledgetest.DOCX("charlie"),
		"picture.png":   {0x89, 'P', 'N', 'G'},
		"nested.zip":    inner,
		"__MACOSX/x.md": []byte("resource fork"),
	})
	srcs, err := knowledge.Extract("kb.zip", z)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range srcs {
		got = append(got, s.Name+"="+s.Text)
	}
	want := "kb.zip/c.docx=charlie kb.zip/docs/a.md=alpha kb.zip/docs/b.pdf=bravo kb.zip/nested.zip/deep.txt=inner text"
	if strings.Join(got, " ") != want {
		t.Errorf("sources:\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
}

// Hostile zips are refused whole: names that escape, too many entries, a
// bomb (whatever its headers claim), zips nested two deep.
func TestExtractHostileZips(t *testing.T) {
	for _, name := range []string{"../evil.txt", "/etc/passwd.txt", `..\evil.txt`, "a/../../evil.txt", "C:/x.txt"} {
		z := knowledgetest.Zip(map[string][]byte{name: []byte("x"), "ok.txt": []byte("fine")})
		if _, err := knowledge.Extract("e.zip", z); err == nil || !strings.Contains(err.Error(), "escapes") {
			t.Errorf("entry %q: err = %v, want an escape refused", name, err)
		}
	}
	many := map[string][]byte{}
	for i := range knowledge.MaxZipEntries + 1 {
		many["f"+fmtInt(i)+".txt"] = []byte("x")
	}
	if _, err := knowledge.Extract("many.zip", knowledgetest.Zip(many)); err == nil || !strings.Contains(err.Error(), "entries") {
		t.Errorf("too many entries: %v", err)
	}
	// 300 MiB of zeros compress to some 300 KiB.
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	f, _ := w.Create("bomb.txt")
	zero := make([]byte, 1<<20)
	for range 300 {
		f.Write(zero)
	}
	w.Close()
	if _, err := knowledge.Extract("bomb.zip", b.Bytes()); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("bomb: %v", err)
	}
	// The same bomb with headers that lie about its size.
	lying := lieAboutSize(t, b.Bytes())
	if _, err := knowledge.Extract("liar.zip", lying); err == nil {
		t.Error("a bomb whose headers claim a small size was read")
	}
	deep := knowledgetest.Zip(map[string][]byte{"l1.zip": knowledgetest.Zip(map[string][]byte{"l2.zip": knowledgetest.Zip(map[string][]byte{"x.txt": []byte("x")})})})
	if _, err := knowledge.Extract("deep.zip", deep); err == nil || !strings.Contains(err.Error(), "nested") {
		t.Errorf("nested twice: %v", err)
	}
	docxBomb := knowledgetest.Zip(map[string][]byte{"word/document.xml": bytes.Repeat([]byte("<"), 1)})
	if _, err := knowledge.Extract("bad.docx", docxBomb); err == nil {
		t.Error("a broken docx was read")
	}
}

// lieAboutSize rewrites a one-entry zip's sizes to claim 1 KiB.
func lieAboutSize(t *testing.T, z []byte) []byte {
	t.Helper()
	out := append([]byte(nil), z...)
	patch := func(sig []byte, off int) {
		for i := 0; ; {
			j := bytes.Index(out[i:], sig)
			if j < 0 {
				return
			}
			p := i + j + off
			out[p], out[p+1], out[p+2], out[p+3] = 0, 4, 0, 0
			i += j + 4
		}
	}
	patch([]byte("PK\x01\x02"), 24) // central directory: uncompressed size
	return out
}

func TestChunk(t *testing.T) {
	var para []string
	for i := range 40 {
		para = append(para, "Sentence number "+fmtInt(i)+" says something.")
	}
	text := strings.Join(para, " ") + "\n\nA second paragraph."
	chunks := knowledge.Chunk(text, 200, 60)
	if len(chunks) < 5 {
		t.Fatalf("%d chunks", len(chunks))
	}
	for i, c := range chunks {
		if n := len([]rune(c)); n > 200 {
			t.Errorf("chunk %d has %d runes", i, n)
		}
		if i > 0 {
			// Overlap: the chunk begins with the previous one's last sentence.
			prev := chunks[i-1]
			first, _, _ := strings.Cut(c, ".")
			if !strings.Contains(prev, first) {
				t.Errorf("chunk %d does not overlap the one before: %q / %q", i, prev, c)
			}
		}
	}
	if !strings.HasSuffix(chunks[len(chunks)-1], "A second paragraph.") {
		t.Errorf("last chunk %q", chunks[len(chunks)-1])
	}
	// Chinese has no spaces: sentences end at 。 and chunks stay bounded.
	zh := strings.Repeat("知识库里有很多文档。每一段都应该被检索到！", 30)
	for i, c := range knowledge.Chunk(zh, 100, 20) {
		if n := len([]rune(c)); n > 100 || strings.Contains(c, " ") {
			t.Errorf("zh chunk %d: %d runes %q", i, n, c)
		}
	}
	// One long word is cut.
	if cs := knowledge.Chunk(strings.Repeat("x", 450), 100, 10); len(cs) < 5 {
		t.Errorf("a 450-rune word: %d chunks", len(cs))
	}
}

func TestTokens(t *testing.T) {
	got := strings.Join(knowledge.Tokens("Hello, World! 知识库 v2 é 猫"), "|")
	if got != "hello|world|知识|识库|v2|é|猫" {
		t.Errorf("tokens %q", got)
	}
}

// Damaged files are errors or text, never a crash or a hang: every
// truncation of a PDF and a DOCX, and bytes flipped through them.
func TestExtractDamaged(t *testing.T) {
	for _, f := range []struct {
		name string
		data []byte
	}{{"a.pdf", knowledgetest.PDF("some text (with parens) here", "and a second line")}, {"a.docx", knowledgetest.DOCX("para one", "para two")}} {
		for n := 0; n < len(f.data); n += 7 {
			knowledge.Extract(f.name, f.data[:n])
			flipped := append([]byte(nil), f.data...)
			flipped[n] ^= 0x5a
			knowledge.Extract(f.name, flipped)
		}
	}
}
