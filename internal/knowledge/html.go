package knowledge

import (
	"bytes"
	"fmt"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// htmlText returns an HTML page's visible text: scripts, styles and
// templates left out, block elements (paragraphs, headings, list items,
// table rows) ended with a blank line so chunking keeps them apart.
func htmlText(data []byte) (string, error) {
	doc, err := html.Parse(bytes.NewReader(data))
	if err != nil {
		return "", fmt.Errorf("html: %w", err)
	}
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		switch n.Type {
		case html.TextNode:
			b.WriteString(n.Data)
			return
		case html.ElementNode:
			switch n.DataAtom {
			case atom.Script, atom.Style, atom.Template, atom.Noscript:
				return
			case atom.Br:
				b.WriteString("\n")
			case atom.Td, atom.Th:
				b.WriteString(" ")
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
		if n.Type == html.ElementNode && blockElement(n.DataAtom) {
			b.WriteString("\n\n")
		}
	}
	walk(doc)
	return tidyLines(b.String()), nil
}

func blockElement(a atom.Atom) bool {
	switch a {
	case atom.P, atom.Div, atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6, atom.Li, atom.Tr,
		atom.Section, atom.Article, atom.Blockquote, atom.Pre, atom.Title, atom.Table, atom.Ul, atom.Ol,
		atom.Dt, atom.Dd, atom.Header, atom.Footer, atom.Main, atom.Aside, atom.Figcaption, atom.Hr:
		return true
	}
	return false
}

// tidyLines trims each line's spaces and folds runs of blank lines into
// one.
func tidyLines(s string) string {
	lines := strings.Split(s, "\n")
	var out []string
	blank := true
	for _, l := range lines {
		l = strings.Join(strings.Fields(l), " ")
		if l == "" {
			if !blank {
				out = append(out, "")
			}
			blank = true
			continue
		}
		out = append(out, l)
		blank = false
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}
