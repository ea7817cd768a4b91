package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The "your own binary" steps of docs/plugins-go.md build: its calculator
// plugin (the README shows the same one), its five-line main and its
// go.mod (the module is not published: a replace names the checkout) make
// a binary, in a module of its own, that lists the plugin next to the
// built-ins.
func TestCustomBinaryAsTheREADMEShows(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var plugin, main, gomod string
	for _, page := range []string{"README.md", filepath.Join("docs", "plugins-go.md")} {
		md, err := os.ReadFile(filepath.Join(repo, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, body := range fencedBlocks(string(md)) {
			switch {
			case strings.HasPrefix(body, "package calc\n"):
				if plugin != "" && body != plugin {
					t.Errorf("%s shows another calc plugin than the page before it:\n%s", page, body)
				}
				plugin = body
			case strings.HasPrefix(body, "package main\n") && strings.Contains(body, `"example.com/alice/calc"`):
				main = body
			case strings.HasPrefix(body, "module example.com/alice\n"):
				gomod = body
			}
		}
	}
	if plugin == "" || main == "" || gomod == "" || !strings.Contains(gomod, "=> /path/to/nekro-go") {
		t.Fatalf("README.md and docs/plugins-go.md lack the calc plugin, the custom main or the go.mod with a replace (found %t %t %t)", plugin != "", main != "", gomod != "")
	}
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", strings.ReplaceAll(gomod, "/path/to/nekro-go", repo))
	write("calc/calc.go", plugin)
	write("mynekro/main.go", main)
	bin := filepath.Join(dir, "mynekro-bin")
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", bin, "./mynekro"}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	out, err := exec.Command(bin, "plugins").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "alice.calc") || !strings.Contains(string(out), "my_sum_function(num1: int, num2: int") ||
		!strings.Contains(string(out), "nekro.basic") || strings.Contains(string(out), "nekro_examples.") {
		t.Errorf("mynekro plugins: %v\n%s", err, out)
	}
}

// fencedBlocks returns the text of each fenced block of a Markdown text.
func fencedBlocks(md string) []string {
	var blocks []string
	var cur *strings.Builder
	for _, line := range strings.SplitAfter(md, "\n") {
		switch {
		case strings.HasPrefix(line, "```") && cur == nil:
			cur = &strings.Builder{}
		case strings.HasPrefix(line, "```"):
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line)
		}
	}
	return blocks
}
