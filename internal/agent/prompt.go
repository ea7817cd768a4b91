package agent

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/host"
	"github.com/nekro-go/nekro/internal/llm"
	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/plugin"
)

// runtimeContract is the first part of every prompt. It depends on
// nothing that changes between requests, so a prompt cache keeps it.
const runtimeContract = `You are the assistant of a chat. You act only by writing Python code: every reply of yours must be exactly one Python 3 script in one fenced block (` + "```python ... ```" + `), with no other text. The host runs the script in a sandbox and shows you what happened only when something needs your attention.

How the sandbox works:
- The script's working directory is /app. ./shared (/app/shared) is read-write and kept between runs of this chat; ./uploads (/app/uploads) is read-only and holds the files users sent and the files you sent.
- There is no network access. PACKAGES
- The functions listed in <plugins> below are already imported; call them as ordinary (blocking) functions. They run on the host.
- The variable _ck holds this chat's key. Talk to the users with send_msg_text(_ck, "...") and send files from ./shared or ./uploads with send_msg_file(_ck, "/app/shared/name.png"). Printing does not reach the users. You cannot write into any other chat: a different chat key is refused.
- A method marked [AGENT METHOD - STOP AFTER CALL] ends the run as soon as it returns: code after it is not executed. Call it last; its result is given back to you and you then write the next script.
- A reply that is not code (no fenced block, and not valid Python) is sent to the chat as your message, as it is, and nothing runs; text outside a fenced block is never sent. Prefer send_msg_text from code.
- If the script fails, you get its output (with the traceback) and may reply with a corrected script. Do not hide errors with try/except around everything.
- Results of some methods appear in the chat history as SYSTEM messages.
`

// SystemPrompt returns the system message: the runtime contract, with
// the sentence on the sandbox's Python packages (probed once per process,
// host.ChatView.Packages), then the enabled plugins' method docs. All
// depend only on the binary, the host and the enabled plugins, so the
// message is byte-identical across requests.
func SystemPrompt(packages, methodDocs string) string {
	return SystemPromptFor(Persona{}, packages, methodDocs)
}

// SystemPromptFor is SystemPrompt for a chat with persona p: the runtime
// contract in p's language, then p's text, then the plugins' method docs.
// It too is byte-identical across a chat's requests while the operator
// does not edit the persona.
func SystemPromptFor(p Persona, packages, methodDocs string) string {
	if packages == "" {
		packages = sandbox.PackagesSentence(nil)
	}
	contract := runtimeContract
	if p.Lang == LangChinese {
		contract = runtimeContractZH
	}
	var b strings.Builder
	b.WriteString(strings.Replace(contract, "PACKAGES", packages, 1))
	b.WriteString(personaBlock(p))
	b.WriteString("\n<plugins>\n")
	b.WriteString(methodDocs)
	b.WriteString("</plugins>\n")
	return b.String()
}

// TurnPrompt is a turn's first request: the system prompt with the methods
// of the chat's view, then the plugins' injected context and the history.
func TurnPrompt(view host.ChatView, chatKey string, history, answering []chat.Message) []llm.ChatMessage {
	return TurnPromptFor(view, Persona{}, chatKey, history, answering)
}

// TurnPromptFor is TurnPrompt for a chat with persona p.
func TurnPromptFor(view host.ChatView, p Persona, chatKey string, history, answering []chat.Message) []llm.ChatMessage {
	return []llm.ChatMessage{
		llm.TextMessage("system", SystemPromptFor(p, view.Packages, view.MethodDocs)),
		llm.TextMessage("user", view.Context+HistoryPrompt(chatKey, history, answering)),
	}
}

// Prompt caps: what the history and the news of a request may take, so no
// chat, however much its code wrote, makes an unbounded request. The
// newest messages are kept, and the prompt says what was left out.
const (
	// MaxPromptMessageBytes caps the text of one message in a prompt.
	MaxPromptMessageBytes = 16 << 10
	// MaxPromptHistoryBytes caps the rendered history of a turn.
	MaxPromptHistoryBytes = 256 << 10
	// MaxPromptNewsBytes caps the messages listed after a run.
	MaxPromptNewsBytes = 64 << 10
)

// renderMessage renders one history entry, its text cut to
// MaxPromptMessageBytes.
func renderMessage(m chat.Message) string {
	var b strings.Builder
	formatMessage(&b, m)
	return b.String()
}

// renderNewest renders the newest of ms that fit in budget bytes, oldest
// first, and returns how many older ones were left out.
func renderNewest(ms []chat.Message, budget int) (entries []string, omitted int) {
	total := 0
	first := len(ms)
	rendered := make([]string, len(ms))
	for i := len(ms) - 1; i >= 0; i-- {
		e := renderMessage(ms[i])
		if total+len(e) > budget {
			break
		}
		total += len(e)
		rendered[i], first = e, i
	}
	return rendered[first:], first
}

// formatMessage renders one history entry on its own lines.
func formatMessage(b *strings.Builder, m chat.Message) {
	ts := m.Time.Format("2006-01-02 15:04:05")
	switch m.Role {
	case chat.User:
		fmt.Fprintf(b, "[#%d %s] %s (user id %s):", m.ID, ts, quoteName(m.SenderName), quoteID(m.SenderID))
	case chat.Assistant:
		fmt.Fprintf(b, "[#%d %s] you (assistant):", m.ID, ts)
	default:
		fmt.Fprintf(b, "[#%d %s] SYSTEM:", m.ID, ts)
	}
	if m.Text != "" {
		// Whoever wrote it (a user, the AI's code, a plugin's note), the
		// text is data: it opens no tag and starts no line of its own.
		text := m.Text
		if len(text) > MaxPromptMessageBytes {
			keep := MaxPromptMessageBytes
			for keep > 0 && !utf8.RuneStart(text[keep]) {
				keep--
			}
			text = fmt.Sprintf("%s\n    [nekro: the rest of this message, %d of its %d bytes, is left out]",
				plugin.EscapePrompt(text[:keep]), len(text)-keep, len(text))
		} else {
			text = plugin.EscapePrompt(text)
		}
		b.WriteString(" " + text)
	}
	b.WriteString("\n")
	for _, a := range m.Attachments {
		fmt.Fprintf(b, "    [%s attachment: %s (%s, %d bytes)]\n", a.Kind,
			plugin.EscapePrompt(a.Path), plugin.EscapePrompt(a.MIME), a.Size)
	}
}

// quoteName shows a sender's name quoted, tag-like text escaped (%q
// already writes line breaks as \n).
func quoteName(s string) string {
	if s == "" {
		return "(no name)"
	}
	return fmt.Sprintf("%q", plugin.EscapePromptTags(s))
}

// quoteID shows a sender's id as it is when it is plain, else quoted as
// quoteName does: ids come from chat platforms and the API.
func quoteID(s string) string {
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("_-.:@", r) {
			return quoteName(s)
		}
	}
	return s
}

// HistoryPrompt renders the chat history as the user message of a turn:
// the history oldest first (each entry numbered by its message id), then
// which messages this turn answers. Earlier entries render identically in
// later turns, so the prompt grows at its end only, until the history is
// over MaxPromptHistoryBytes: then the oldest entries are left out, and a
// line says how many.
func HistoryPrompt(chatKey string, history []chat.Message, answering []chat.Message) string {
	entries, omitted := renderNewest(history, MaxPromptHistoryBytes)
	head := ""
	if omitted > 0 {
		head = fmt.Sprintf("[nekro: %d older message(s) left out: the history shown is capped at %d KiB, newest kept]\n",
			omitted, MaxPromptHistoryBytes>>10)
	}
	return historyPrompt(chatKey, head, entries, answering)
}

// historyPrompt renders the user message of a turn: head (what stands for
// older messages: a note, a summary) and the rendered entries inside the
// chat_history tag, then which messages this turn answers.
func historyPrompt(chatKey, head string, entries []string, answering []chat.Message) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<chat_history chat_key=%q>\n", plugin.EscapePromptTags(chatKey))
	b.WriteString(head)
	for _, e := range entries {
		b.WriteString(e)
	}
	b.WriteString("</chat_history>\n")
	if len(answering) > 0 {
		ids := make([]string, len(answering))
		users := map[string]bool{}
		for i, m := range answering {
			ids[i] = fmt.Sprintf("#%d", m.ID)
			if m.Role == chat.User {
				users[m.SenderID] = true
			}
		}
		fmt.Fprintf(&b, "Answer the new message(s) %s. Reply with one Python script.\n", strings.Join(ids, ", "))
		if len(users) > 1 {
			fmt.Fprintf(&b, "These messages come from %d different users, so your script runs for no user: "+
				"methods that keep data per user fail. Answer without them, or ask each user to write on their own.\n", len(users))
		}
	}
	return b.String()
}

// Feedback caps: the head and the tail of a failed run's output are kept
// (the traceback is at the end).
const (
	feedbackHead = 2000
	feedbackTail = 4000
)

// capOutput cuts the middle of s when it is longer than the caps.
func capOutput(s string) string {
	if len(s) <= feedbackHead+feedbackTail {
		return s
	}
	head, tail := s[:feedbackHead], s[len(s)-feedbackTail:]
	head = strings.ToValidUTF8(head, "")
	tail = strings.ToValidUTF8(tail, "")
	return fmt.Sprintf("%s\n...[%d bytes cut]...\n%s", head, len(s)-feedbackHead-feedbackTail, tail)
}

// newMessagesText lists the messages written since the prompt was built
// (what the run sent, system messages), so the model knows what already
// happened before it tries again.
func newMessagesText(ms []chat.Message) string {
	if len(ms) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nNew in the chat since your last script:\n")
	entries, omitted := renderNewest(ms, MaxPromptNewsBytes)
	if omitted > 0 {
		fmt.Fprintf(&b, "[nekro: %d older new message(s) left out: this list is capped at %d KiB, newest kept]\n",
			omitted, MaxPromptNewsBytes>>10)
	}
	for _, e := range entries {
		b.WriteString(e)
	}
	return b.String()
}

// failureFeedback is the user message after a run that failed.
func failureFeedback(stop sandbox.StopType, note, output string, attempt, max int, news []chat.Message) string {
	var b strings.Builder
	b.WriteString("[Sandbox Output]\n")
	if strings.TrimSpace(output) == "" {
		b.WriteString("(no output)\n")
	} else {
		b.WriteString(plugin.EscapePromptTags(capOutput(output)))
		if !strings.HasSuffix(output, "\n") {
			b.WriteString("\n")
		}
	}
	b.WriteString("---\n")
	switch stop {
	case sandbox.Timeout:
		b.WriteString("The script was stopped: it ran past its time limit.")
	case sandbox.Manual:
		b.WriteString("The script stopped itself with exit(9).")
	default:
		b.WriteString("The script ended with an error.")
	}
	if note != "" {
		b.WriteString(" (" + note + ")")
	}
	fmt.Fprintf(&b, " This was attempt %d of %d. Reply with one corrected Python script; do not repeat what already succeeded.\n", attempt, max)
	b.WriteString(newMessagesText(news))
	return b.String()
}

// agentFeedback is the user message after an AGENT method ended the run.
func agentFeedback(method, result string, news []chat.Message) string {
	return fmt.Sprintf("[Agent Method Response] %s returned:\n%s\n[result end]\n"+
		"The code after the agent method call was NOT executed. Continue based on this response with one Python script.\n%s",
		method, plugin.EscapePromptTags(result), newMessagesText(news))
}
