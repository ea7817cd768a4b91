// Package docs holds nekro's guides (the Markdown files next to this
// test). Its test keeps them true to the code: every relative link and
// #anchor of README.md and docs/*.md resolves; every Go block marked
//
//	<!-- from plugin.ExampleStore -->
//
// is the code of that Example function as `go doc` shows it (the body,
// or the whole file of a whole-file example), so a snippet cannot drift
// from code `go test` compiles and runs; and architecture.md names every
// package `go list ./...` prints, and no package that is gone.
//
// After changing an Example, `go test ./docs/ -update` rewrites the
// marked blocks.
package docs

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

var update = flag.Bool("update", false, "rewrite the Go blocks marked <!-- from pkg.ExampleName --> from the Example functions")

// module is the module path, as go.mod names it.
const module = "github.com/nekro-go/nekro"

// root is the repository's root; tests run in docs/.
const root = ".."

// pages returns README.md and every docs/*.md, relative to root.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rel)
	}
	return out
}

func read(t *testing.T, page string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// line is one line of a page, with whether it lies in a fenced block.
type line struct {
	n      int // 1-based
	text   string
	fenced bool // inside a ``` block, or its fence
}

func lines(md string) []line {
	var out []line
	in := false
	for i, l := range strings.Split(md, "\n") {
		fence := strings.HasPrefix(strings.TrimSpace(l), "```")
		out = append(out, line{n: i + 1, text: l, fenced: in || fence})
		if fence {
			in = !in
		}
	}
	return out
}

var (
	headingRE  = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	codeSpanRE = regexp.MustCompile("`[^`]*`")
	linkRE     = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
)

// anchors returns the #anchors GitHub gives the headings of md.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range lines(md) {
		m := headingRE.FindStringSubmatch(l.text)
		if l.fenced || m == nil {
			continue
		}
		slug := slugify(m[2])
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// slugify is GitHub's heading anchor: lower case, punctuation dropped
// (letters, digits, '-', '_' and spaces kept), spaces made '-'.
func slugify(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Every relative link of the pages names a file or directory of the
// repository, and every #anchor a heading of its page.
func TestLinks(t *testing.T) {
	for _, page := range pages(t) {
		md := read(t, page)
		for _, l := range lines(md) {
			if l.fenced {
				continue
			}
			text := codeSpanRE.ReplaceAllString(l.text, "")
			for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				file := page
				if path != "" {
					file = filepath.Join(filepath.Dir(page), path)
					if strings.HasPrefix(file, "..") {
						t.Errorf("%s:%d: %s leaves the repository", page, l.n, target)
						continue
					}
					if _, err := os.Stat(filepath.Join(root, file)); err != nil {
						t.Errorf("%s:%d: %s: no such file", page, l.n, target)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(file, ".md") {
					t.Errorf("%s:%d: %s: an anchor into a file that is not Markdown", page, l.n, target)
					continue
				}
				if !anchors(read(t, file))[anchor] {
					t.Errorf("%s:%d: %s: %s has no heading with the anchor #%s", page, l.n, target, file, anchor)
				}
			}
		}
	}
}

func TestSlugify(t *testing.T) {
	for heading, want := range map[string]string{
		"Chat platforms: QQ through OneBot v11":      "chat-platforms-qq-through-onebot-v11",
		"`nekro exec`":                               "nekro-exec",
		"What the AI sees, and what you can rely on": "what-the-ai-sees-and-what-you-can-rely-on",
		"Packages per chat (`pip install` in a run)": "packages-per-chat-pip-install-in-a-run",
	} {
		if got := slugify(heading); got != want {
			t.Errorf("slugify(%q) = %q, want %q", heading, got, want)
		}
	}
}

var markerRE = regexp.MustCompile(`^<!-- from ([A-Za-z0-9_/]+)\.(Example[A-Za-z0-9_]*) -->$`)

// snippet is one marked block of a page.
type snippet struct {
	page       string
	marker     int // line of the marker
	dir, name  string
	start, end int // 0-based indexes of the block's first and last code line + 1 in the page's lines
}

// snippets finds the marked blocks of md: a marker, then (blank lines
// allowed) a ```go block.
func snippets(t *testing.T, page, md string) []snippet {
	t.Helper()
	ls := strings.Split(md, "\n")
	var out []snippet
	for i, l := range ls {
		m := markerRE.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			if strings.Contains(l, "<!-- from ") {
				t.Errorf("%s:%d: a marker must read <!-- from dir.ExampleName -->: %q", page, i+1, l)
			}
			continue
		}
		j := i + 1
		for j < len(ls) && strings.TrimSpace(ls[j]) == "" {
			j++
		}
		if j == len(ls) || strings.TrimSpace(ls[j]) != "```go" {
			t.Errorf("%s:%d: the marker is not followed by a ```go block", page, i+1)
			continue
		}
		k := j + 1
		for k < len(ls) && strings.TrimSpace(ls[k]) != "```" {
			k++
		}
		if k == len(ls) {
			t.Errorf("%s:%d: the block after the marker does not end", page, i+1)
			continue
		}
		out = append(out, snippet{page: page, marker: i + 1, dir: m[1], name: m[2], start: j + 1, end: k})
	}
	return out
}

// exampleCode returns the code of the Example function name in the test
// files of dir (relative to root) as `go doc` shows it: its body, less one
// level of indentation, or the whole file for a whole-file example.
func exampleCode(dir, name string) (string, error) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(root, dir, "*_test.go"))
	if err != nil {
		return "", err
	}
	for _, path := range paths {
		src, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return "", err
		}
		for _, ex := range doc.Examples(f) {
			if "Example"+ex.Name != name {
				continue
			}
			switch code := ex.Code.(type) {
			case *ast.File:
				return strings.TrimSpace(string(src)), nil
			case *ast.BlockStmt:
				body := string(src[fset.Position(code.Lbrace).Offset+1 : fset.Position(code.Rbrace).Offset])
				var out []string
				for _, l := range strings.Split(strings.Trim(body, "\n"), "\n") {
					out = append(out, strings.TrimPrefix(l, "\t"))
				}
				return strings.Join(out, "\n"), nil
			}
		}
	}
	return "", fmt.Errorf("no %s in %s's test files", name, dir)
}

// The Go blocks marked as coming from an Example are its code.
func TestExampleSnippets(t *testing.T) {
	found := 0
	for _, page := range pages(t) {
		md := read(t, page)
		ss := snippets(t, page, md)
		if len(ss) == 0 {
			continue
		}
		found += len(ss)
		ls := strings.Split(md, "\n")
		// Replace from the last block up, so earlier indexes stay valid.
		slices.Reverse(ss)
		changed := false
		for _, s := range ss {
			want, err := exampleCode(s.dir, s.name)
			if err != nil {
				t.Errorf("%s:%d: %v", page, s.marker, err)
				continue
			}
			got := strings.Join(ls[s.start:s.end], "\n")
			if got == want {
				continue
			}
			if *update {
				ls = slices.Concat(ls[:s.start], strings.Split(want, "\n"), ls[s.end:])
				changed = true
				continue
			}
			t.Errorf("%s:%d: the block differs from %s.%s (go test ./docs/ -update rewrites it):\n--- page\n%s\n--- example\n%s",
				page, s.marker, s.dir, s.name, got, want)
		}
		if changed {
			if err := os.WriteFile(filepath.Join(root, page), []byte(strings.Join(ls, "\n")), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if found == 0 {
		t.Error("no page has a block marked <!-- from dir.ExampleName -->")
	}
}

// packages returns what `go list ./...` prints, relative to the module
// (the root package as the module path). It runs offline: the module's
// dependencies are already in the cache when its tests build.
func packages(t *testing.T) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	cmd := exec.Command(goBin, "list", "-e", "-f", "{{.ImportPath}}", "./...")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, stderr.String())
	}
	var pkgs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		p := sc.Text()
		if rel, ok := strings.CutPrefix(p, module+"/"); ok {
			p = rel
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

var mapCellRE = regexp.MustCompile("^\\|\\s*`([^`]+)`")

// architecture.md names every package of the module (as `path`, relative
// to the module), and each row of its map names a package that exists.
func TestArchitectureMap(t *testing.T) {
	md := read(t, filepath.Join("docs", "architecture.md"))
	pkgs := packages(t)
	for _, p := range pkgs {
		if !strings.Contains(md, "`"+p+"`") {
			t.Errorf("docs/architecture.md does not mention the package `%s` (go list ./... prints it)", p)
		}
	}
	for _, l := range lines(md) {
		m := mapCellRE.FindStringSubmatch(l.text)
		if l.fenced || m == nil {
			continue
		}
		if !slices.Contains(pkgs, m[1]) {
			t.Errorf("docs/architecture.md:%d: the map names `%s`, which go list ./... does not print", l.n, m[1])
		}
	}
}
