package agent

import (
	"context"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"time"
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

// hasFence reports whether the reply (reasoning dropped) holds a fenced
// block of Python (labelled python, py, python3, or unlabelled).
func hasFence(reply string) bool {
	reply = thinkRE.ReplaceAllString(reply, "")
	for _, m := range fenceRE.FindAllStringSubmatch(reply, -1) {
		if lang := strings.ToLower(m[2]); lang == "" || lang == "python" || lang == "py" || lang == "python3" {
			return true
		}
	}
	return false
}

// proseOf returns the reply's words when the reply is not code: it has no
// fenced Python block and does not parse as Python (checked with the
// host's interpreter, isPython). The rule, as the prompt states it: a
// fenced block is run and the text around it is not sent; an unfenced
// reply that is valid Python is run; anything else is the assistant's
// message to the chat.
func proseOf(ctx context.Context, reply string, isPython func(ctx context.Context, src string) bool) string {
	if hasFence(reply) {
		return ""
	}
	text := strings.TrimSpace(thinkRE.ReplaceAllString(reply, ""))
	if i := strings.LastIndex(text, "</think>"); i >= 0 {
		text = strings.TrimSpace(text[i+len("</think>"):])
	}
	if text == "" || strings.HasPrefix(text, "```") || strings.HasPrefix(text, "~~~") || isPython(ctx, text) {
		return ""
	}
	return text
}

// pythonParses reports whether src parses as Python 3, asking the host's
// interpreter (ast.parse, no execution, 2 s at most). When it cannot
// tell, it says yes: the reply is then run, as before this check.
func pythonParses(python string) func(ctx context.Context, src string) bool {
	return func(ctx context.Context, src string) bool {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, python, "-I", "-S", "-c", "import ast, sys\ntry:\n    ast.parse(sys.stdin.read())\nexcept SyntaxError:\n    sys.exit(3)")
		cmd.Stdin = strings.NewReader(src)
		err := cmd.Run()
		var ee *exec.ExitError
		return !(errors.As(err, &ee) && ee.ExitCode() == 3)
	}
}
