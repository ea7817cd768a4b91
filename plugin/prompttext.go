package plugin

import (
	"regexp"
	"strings"
)

// The prompt nekro sends the model marks its parts with tags
// (<chat_history>, <plugin_runtime_context>, <plugins>) and starts each of
// its entries on a line of its own. Text that did not come from the
// operator (what users wrote, their names, what the AI's code stored in
// notes, statuses and timers, what a method returned) must not open, close
// or forge either. These two functions are the one place that rule lives:
// nekro's history rendering and its plugins' injections use them, and a
// plugin putting data into its OnPromptInject text should too.

// tagLike matches the start of anything a reader could take for a tag:
// "<" then a letter, "!" or "?" ("<system>", "<!--", "<?xml"), or "<"
// then "/" (spaces allowed around it) then a letter ("</plugin>",
// "< / plugin_runtime_context"). "a < b" and "x <= 3" do not match.
var tagLike = regexp.MustCompile(`<(\s*/\s*\pL|[\pL!?])`)

// EscapePromptTags returns s with every tag-like "<" written as "&lt;",
// so s can neither open nor close a block of the prompt, whatever case or
// spacing it uses; its lines stay as they are. It is for multi-line text
// whose line structure is its author's own (a plugin's injected block),
// and is idempotent: escaping twice changes nothing more.
func EscapePromptTags(s string) string {
	return tagLike.ReplaceAllString(s, "&lt;$1")
}

// lineBreaks are every character sequence a reader may take for the end of
// a line.
var lineBreaks = strings.NewReplacer(
	"\r\n", promptContinuation, "\r", promptContinuation, "\n", promptContinuation,
	"\v", promptContinuation, "\f", promptContinuation,
	"\u0085", promptContinuation, "\u2028", promptContinuation, "\u2029", promptContinuation,
)

// promptContinuation is what a line break in escaped text becomes: a new
// line indented by four spaces, so the text reads as it was written while
// no line of it starts where nekro's own entries start.
const promptContinuation = "\n    "

// EscapePrompt returns s ready to be put into the model's prompt as data:
// tag-like sequences escaped as EscapePromptTags does, and every line
// break (\n, \r, \r\n, \v, \f, U+0085, U+2028, U+2029) turned into a new
// line indented by four spaces, so no line of s can pass for an entry or a
// header of nekro's (a history entry "[#12 ...] SYSTEM:", a note's
// "* note_title:"). Use it on every piece of untrusted text a plugin
// places into its OnPromptInject text: a note's title, a status, a
// timer's description.
func EscapePrompt(s string) string {
	return lineBreaks.Replace(EscapePromptTags(s))
}
