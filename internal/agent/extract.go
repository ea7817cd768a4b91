package agent

import (
	"regexp"
	"strings"
)

var (
	thinkRE = regexp.MustCompile(`(?s)<think>.*?</think>`)
	// fenceRE matches a fenced block: ``` or ~~~, an optional language,
	// the body, and the same fence closing it at the start of a line.
	fenceRE = regexp.MustCompile("(?ms)^[ \t]*(```|~~~)[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)\n[ \t]*(?:```|~~~)[ \t]*$")
)

// ExtractCode returns the Python script in a model's reply. Reasoning in
// <think>...</think> is dropped. If the reply has fenced code blocks, the
// longest one labelled python (or unlabelled) wins; a reply without fences
// is taken as code entirely, so a model that forgets the fence still gets
// its code run (or its SyntaxError shown to it).
func ExtractCode(reply string) string {
	reply = thinkRE.ReplaceAllString(reply, "")
	if i := strings.LastIndex(reply, "</think>"); i >= 0 {
		reply = reply[i+len("</think>"):]
	}
	best, found := "", false
	for _, m := range fenceRE.FindAllStringSubmatch(reply, -1) {
		lang := strings.ToLower(m[2])
		if lang != "" && lang != "python" && lang != "py" && lang != "python3" {
			continue
		}
		if !found || len(m[3]) > len(best) {
			best, found = m[3], true
		}
	}
	if found {
		return best + "\n"
	}
	code := strings.TrimSpace(reply)
	// An opening fence the model never closed.
	if strings.HasPrefix(code, "```") || strings.HasPrefix(code, "~~~") {
		if i := strings.IndexByte(code, '\n'); i >= 0 {
			code = code[i+1:]
		} else {
			code = ""
		}
		code = strings.TrimSuffix(strings.TrimRight(code, " \t\n"), "```")
	}
	return code + "\n"
}
