package knowledge

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// docxText returns the paragraphs of a Word document (a zip whose
// word/document.xml holds the body), one per line with a blank line
// between; tabs and line breaks kept. The entry is read within the
// import's budget, as a zip entry.
func docxText(data []byte, b *budget) (string, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return "", fmt.Errorf("docx (a zip): %w", err)
	}
	var body []byte
	for _, f := range zr.File {
		if f.Name == "word/document.xml" {
			if body, err = readEntry(f, b); err != nil {
				return "", fmt.Errorf("docx: %w", err)
			}
		}
	}
	if body == nil {
		return "", errors.New("docx: no word/document.xml in it")
	}
	const wordNS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
	dec := xml.NewDecoder(bytes.NewReader(body))
	var out strings.Builder
	inText := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("docx: word/document.xml: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if t.Name.Space != wordNS {
				continue
			}
			switch t.Name.Local {
			case "t":
				inText = true
			case "tab":
				out.WriteString("\t")
			case "br", "cr":
				out.WriteString("\n")
			}
		case xml.EndElement:
			if t.Name.Space != wordNS {
				continue
			}
			switch t.Name.Local {
			case "t":
				inText = false
			case "p":
				out.WriteString("\n\n")
			case "tc":
				out.WriteString(" ")
			}
		case xml.CharData:
			if inText {
				out.Write(t)
			}
		}
	}
	return tidyLines(out.String()), nil
}
