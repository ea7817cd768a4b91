package knowledge

import (
	"archive/zip"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode/utf8"
)

// Limits of what an import reads. A file over them is refused with an
// error saying which limit; nothing of it is kept.
const (
	// MaxFileBytes is the largest file accepted (an upload, or the CLI's).
	MaxFileBytes = 64 << 20
	// MaxZipEntries is the most entries one zip may list (nested zips
	// count theirs too).
	MaxZipEntries = 2000
	// MaxExpandedBytes is the most bytes the entries of one import may
	// decompress to, in all: a zip bomb stops there.
	MaxExpandedBytes = 256 << 20
	// MaxTextRunes is the most text one import keeps, all sources
	// together.
	MaxTextRunes = 20 << 20
)

// ErrTooLarge is returned (wrapped, naming the file) for a file over
// MaxFileBytes.
var ErrTooLarge = errors.New("file too large")

// ErrUnsupported is returned (wrapped, naming the file) for a format the
// knowledge base does not read.
var ErrUnsupported = errors.New("unsupported format")

// Source is the text of one file of an import: the file itself, or one
// entry of a zip (Name is then "archive.zip/dir/entry.md").
type Source struct {
	Name string
	Text string
}

// Formats lists the file name extensions an import reads.
var Formats = []string{".txt", ".md", ".markdown", ".html", ".htm", ".csv", ".pdf", ".docx", ".zip"}

// budget is what one import may still expand to.
type budget struct {
	entries  int
	expanded int64
	runes    int
}

func (b *budget) text(name, s string) error {
	b.runes += utf8.RuneCountInString(s)
	if b.runes > MaxTextRunes {
		return fmt.Errorf("%s: the import holds more than %d characters of text", name, MaxTextRunes)
	}
	return nil
}

// Extract returns the text of a file, by its name's extension: plain text
// and Markdown as they are, HTML without its markup, CSV as one line per
// row ("column: value; ..."), PDF's text objects, DOCX's paragraphs, and
// each supported entry of a zip (a zip inside a zip is read, one level
// deep; entries of other formats are skipped).
func Extract(name string, data []byte) ([]Source, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d accepted: %w", name, len(data), MaxFileBytes, ErrTooLarge)
	}
	b := &budget{}
	return extract(name, data, b, 0)
}

func extract(name string, data []byte, b *budget, depth int) ([]Source, error) {
	ext := strings.ToLower(path.Ext(name))
	var text string
	var err error
	switch ext {
	case ".txt", ".md", ".markdown", ".text":
		text = plainText(data)
	case ".html", ".htm":
		text, err = htmlText(data)
	case ".csv":
		text, err = csvText(data)
	case ".pdf":
		text, err = pdfText(data)
	case ".docx":
		text, err = docxText(data, b)
	case ".zip":
		return zipSources(name, data, b, depth)
	default:
		return nil, fmt.Errorf("%s: %w (known: %s)", name, ErrUnsupported, strings.Join(Formats, " "))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := b.text(name, text); err != nil {
		return nil, err
	}
	return []Source{{Name: name, Text: text}}, nil
}

// plainText is data as UTF-8 (invalid bytes replaced), a byte order mark
// dropped.
func plainText(data []byte) string {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	return strings.ToValidUTF8(string(data), "\uFFFD")
}

// csvText writes each row after the header as "column: value; ...", so a
// chunk carries its columns' names.
func csvText(data []byte) (string, error) {
	r := csv.NewReader(strings.NewReader(plainText(data)))
	r.FieldsPerRecord = -1
	r.LazyQuotes = true
	var header []string
	var out strings.Builder
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("csv: %w", err)
		}
		if header == nil {
			header = rec
			continue
		}
		parts := make([]string, 0, len(rec))
		for i, v := range rec {
			v = strings.TrimSpace(v)
			if v == "" {
				continue
			}
			if i < len(header) && strings.TrimSpace(header[i]) != "" {
				v = strings.TrimSpace(header[i]) + ": " + v
			}
			parts = append(parts, v)
		}
		out.WriteString(strings.Join(parts, "; "))
		out.WriteString("\n\n")
	}
	if header != nil && out.Len() == 0 { // a header only: keep it
		return strings.Join(header, "; "), nil
	}
	return out.String(), nil
}

// zipSources reads a zip's entries. It refuses the whole zip when an
// entry's name could escape a directory (absolute, "..", a backslash or
// a drive letter), when it lists more than MaxZipEntries, or when its
// entries expand past MaxExpandedBytes (counted as they are read, not as
// their headers claim); a zip inside it is read, one inside that is
// refused.
func zipSources(name string, data []byte, b *budget, depth int) ([]Source, error) {
	if depth > 1 {
		return nil, fmt.Errorf("%s: a zip nested more than one level deep", name)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("%s: zip: %w", name, err)
	}
	b.entries += len(zr.File)
	if b.entries > MaxZipEntries {
		return nil, fmt.Errorf("%s: more than %d zip entries", name, MaxZipEntries)
	}
	for _, f := range zr.File {
		if err := checkEntryName(f.Name); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	var out []Source
	for _, f := range zr.File {
		if f.FileInfo().IsDir() {
			continue
		}
		ext := strings.ToLower(path.Ext(f.Name))
		if !supported(ext) || strings.HasPrefix(path.Base(f.Name), ".") || strings.HasPrefix(f.Name, "__MACOSX/") {
			continue // pictures, binaries, resource forks: not text
		}
		body, err := readEntry(f, b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		srcs, err := extract(name+"/"+f.Name, body, b, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, srcs...)
	}
	return out, nil
}

func supported(ext string) bool {
	for _, f := range Formats {
		if f == ext {
			return true
		}
	}
	return ext == ".text"
}

// checkEntryName refuses a zip entry name that could leave the
// directory it is unpacked into.
func checkEntryName(n string) error {
	bad := n == "" || strings.HasPrefix(n, "/") || strings.Contains(n, "\\") || strings.ContainsRune(n, 0) ||
		(len(n) >= 2 && n[1] == ':')
	for _, part := range strings.Split(n, "/") {
		if part == ".." {
			bad = true
		}
	}
	if bad {
		return fmt.Errorf("zip entry %q escapes its directory: refused", n)
	}
	return nil
}

// readEntry decompresses one entry within the import's budget.
func readEntry(f *zip.File, b *budget) ([]byte, error) {
	left := int64(MaxExpandedBytes) - b.expanded
	if f.UncompressedSize64 > uint64(left) || f.UncompressedSize64 > MaxFileBytes {
		return nil, fmt.Errorf("zip entry %s expands to %d bytes: over the import's limit of %d", f.Name, f.UncompressedSize64, MaxExpandedBytes)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("zip entry %s: %w", f.Name, err)
	}
	defer rc.Close()
	// The header's size may lie: read at most one byte more than allowed.
	limit := min(left, int64(MaxFileBytes))
	body, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, fmt.Errorf("zip entry %s: %w", f.Name, err)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("zip entry %s expands past the import's limit of %d bytes", f.Name, MaxExpandedBytes)
	}
	b.expanded += int64(len(body))
	return body, nil
}
