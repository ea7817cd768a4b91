// Package pysig renders a sandbox method as the AI's Python sees it: its
// signature and its docstring. The generated stub (api_caller.py) and the
// prompt's method list both render through here, so the code and the model
// read the same text.
package pysig

import (
	"regexp"
	"strings"

	"github.com/nekro-go/nekro/internal/pluginhost"
)

// Params renders the parameter list, e.g. "num1: int, times: int = 1".
func Params(m *pluginhost.MethodInfo) string {
	var parts []string
	for _, p := range m.Params() {
		s := p.Name + ": " + p.PyType
		if p.Optional {
			s += " = " + p.DefaultPy
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// Signature renders the whole signature, e.g.
// "my_sum_function(num1: int, num2: int) -> int".
func Signature(m *pluginhost.MethodInfo) string {
	return m.Name + "(" + Params(m) + ") -> " + m.ResultPyType()
}

// sectionRE matches a Google-style docstring section header.
var sectionRE = regexp.MustCompile(`^(Args|Arguments|Parameters|Returns|Return|Yields|Raises|Example|Examples|Note|Notes):\s*$`)

// argRE matches the first line of an entry of an Args block.
var argRE = regexp.MustCompile(`^\s+([A-Za-z_][A-Za-z0-9_]*)\s*(?:\([^)]*\))?\s*:\s?(.*)$`)

// Doc returns the method's doc text with its Args block made from its
// parameters: one line per parameter, "name (type): text", the text from
// the field's `jsonschema:"..."` tag. A parameter without one keeps what
// an Args block the author wrote says of it. The block replaces the
// author's, or is placed before the first other section (Returns,
// Example, ...), or at the end.
func Doc(m *pluginhost.MethodInfo) string {
	lines := strings.Split(strings.TrimSpace(m.Doc), "\n")
	if len(lines) == 1 && lines[0] == "" {
		lines = nil
	}
	// Find the author's Args block and what it says of each parameter.
	start, end := -1, -1
	written := map[string][]string{}
	for i := 0; i < len(lines); i++ {
		h := sectionRE.FindStringSubmatch(lines[i])
		if h == nil || (h[1] != "Args" && h[1] != "Arguments" && h[1] != "Parameters") {
			continue
		}
		start, end = i, len(lines)
		current := ""
		for j := i + 1; j < len(lines); j++ {
			l := lines[j]
			if l != "" && l[0] != ' ' && l[0] != '\t' {
				end = j
				break
			}
			if a := argRE.FindStringSubmatch(l); a != nil && indent(l) <= 4 {
				current = a[1]
				written[current] = []string{strings.TrimSpace(a[2])}
			} else if current != "" && strings.TrimSpace(l) != "" {
				written[current] = append(written[current], "    "+strings.TrimSpace(l))
			}
		}
		for end > start+1 && strings.TrimSpace(lines[end-1]) == "" {
			end-- // keep the blank line before the next section
		}
		break
	}
	params := m.Params()
	var block []string
	if len(params) > 0 {
		block = append(block, "Args:")
		for _, p := range params {
			text := []string{strings.TrimSpace(p.Doc)}
			if text[0] == "" && len(written[p.Name]) > 0 {
				text = written[p.Name]
			}
			line := "    " + p.Name + " (" + p.PyType + ")"
			if text[0] != "" {
				line += ": " + text[0]
			}
			block = append(block, line)
			for _, more := range text[1:] {
				block = append(block, "    "+more)
			}
		}
	}
	var out []string
	switch {
	case start >= 0:
		out = append(append(append(out, lines[:start]...), block...), lines[end:]...)
	case len(block) == 0:
		out = lines
	default:
		at := len(lines)
		for i, l := range lines {
			if i > 0 && sectionRE.MatchString(l) {
				at = i
				break
			}
		}
		out = append(out, lines[:at]...)
		if at > 0 && strings.TrimSpace(lines[at-1]) != "" {
			out = append(out, "")
		}
		out = append(out, block...)
		if at < len(lines) {
			out = append(append(out, ""), lines[at:]...)
		}
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

func indent(l string) int { return len(l) - len(strings.TrimLeft(l, " \t")) }
