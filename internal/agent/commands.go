package agent

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"

	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/pluginhost"
)

// DefaultCommandPrefix starts a chat command ("/help").
const DefaultCommandPrefix = "/"

// command answers in's text when it is a chat command: the prefix, then
// the name or an alias of an enabled plugin's command, or "help". ok is
// false for any other text (it goes to the model as usual, "/shrug" too).
func (a *Agent) command(ctx context.Context, in Incoming) (answer commandAnswer, ok bool) {
	prefix := a.cfg.CommandPrefix
	rest, found := strings.CutPrefix(strings.TrimSpace(in.Text), prefix)
	if !found || rest == "" || unicode.IsSpace(rune(rest[0])) {
		return a.answerPending(ctx, in)
	}
	words := splitWords(rest)
	name := words[0]
	cmds := a.commands()
	if name == "help" {
		a.takeWait(in) // a command cancels the sender's pending question
		return commandAnswer{Text: a.help(in, cmds)}, true
	}
	i := slices.IndexFunc(cmds, func(c pluginhost.CommandInfo) bool { return named(c, name) })
	if i < 0 {
		return a.answerPending(ctx, in)
	}
	a.takeWait(in)
	return a.runCommand(ctx, in, cmds[i], name, words[1:], argsLine(rest)), true
}

// answerPending answers the question a command asked in's sender in this
// chat (CmdCtl.wait) with in's text; ok is false when none is pending.
func (a *Agent) answerPending(ctx context.Context, in Incoming) (commandAnswer, bool) {
	pw := a.takeWait(in)
	if pw == nil {
		return commandAnswer{}, false
	}
	return a.answerWait(ctx, in, pw)
}

// commandAnswer is what a command posts: its text and the files it
// attached (stored in the chat's uploads).
type commandAnswer struct {
	Text  string
	Files []chat.Attachment
}

// runCommand runs c, named name, for in's sender with the words and line
// of its arguments, and returns the answer to post: its text and files,
// or why it failed or may not be used. The command may ask the sender a
// question (CommandCall.Wait), which their next message answers.
func (a *Agent) runCommand(ctx context.Context, in Incoming, c pluginhost.CommandInfo, name string, words []string, line string) commandAnswer {
	prefix := a.cfg.CommandPrefix
	if !a.may(in, c.Permission) {
		return commandAnswer{Text: fmt.Sprintf("%s%s: you may not use this command (it is for %s)", prefix, name, permissionWho[c.Permission])}
	}
	pctx := a.plugins.PluginCtx(ctx, c.Plugin, in.ChatKey, in.UserID)
	var files []chat.Attachment
	call := pluginhost.CommandCall{Words: words, Line: line, UserName: in.UserName,
		SuperUser: a.superUser(in), Admin: in.Admin,
		Wait: func(w pluginhost.CommandWait) { a.ask(in, c.Plugin, w) },
		Attach: func(name, kind string, content io.Reader) error {
			f, err := a.chats.SaveAttachment(ctx, in.ChatKey, name, kind, content)
			if err == nil {
				files = append(files, f)
			}
			return err
		}}
	text, err := safeCommand(func() (string, error) { return c.Run(pctx, call) })
	if err != nil {
		a.log.Info("command failed", "chat", in.ChatKey, "command", name, "err", err)
		return commandAnswer{Text: fmt.Sprintf("%s%s failed: %v", prefix, name, err), Files: files}
	}
	return commandAnswer{Text: text, Files: files}
}

// named reports whether name names c: its name or an alias, alone or
// after its plugin's key as the reference addresses plugin commands,
// "KEY:name" ("tester.mycmds:mycmd"; '-' in the name read as '_'), the
// namespace:name form Nekro Agent's help and plugins' documents show.
func named(c pluginhost.CommandInfo, name string) bool {
	if ns, short, ok := strings.Cut(name, ":"); ok {
		if c.Plugin == nil || ns != c.Plugin.Key() {
			return false
		}
		name = strings.ReplaceAll(short, "-", "_")
	}
	return c.Name == name || slices.Contains(c.Aliases, name)
}

// commands lists the enabled plugins' chat commands.
func (a *Agent) commands() []pluginhost.CommandInfo {
	var out []pluginhost.CommandInfo
	for _, p := range a.plugins.Registry().Plugins() {
		out = append(out, pluginhost.Commands(p)...)
	}
	return out
}

var permissionWho = map[string]string{"public": "everyone", "user": "users", "admin": "the chat's admins", "super": "super users"}

// superUser reports whether the sender is one of the operator's super
// users (--super-users).
func (a *Agent) superUser(in Incoming) bool {
	return in.UserID != "" && slices.Contains(a.cfg.SuperUsers, in.UserID)
}

// argsLine is the text after a command's name (rest is the message
// without the prefix), as typed: a command that parses its own
// arguments (a Python plugin's) reads it.
func argsLine(rest string) string {
	i := strings.IndexFunc(rest, unicode.IsSpace)
	if i < 0 {
		return ""
	}
	return strings.TrimSpace(rest[i:])
}

// may reports whether the sender may use a command of permission.
func (a *Agent) may(in Incoming, permission string) bool {
	super := a.superUser(in)
	switch permission {
	case "public":
		return true
	case "user":
		return in.UserID != ""
	case "admin":
		return in.Admin || super
	}
	return super
}

// help lists the commands the sender may use.
func (a *Agent) help(in Incoming, cmds []pluginhost.CommandInfo) string {
	var b strings.Builder
	b.WriteString("Commands:\n")
	fmt.Fprintf(&b, "%shelp - list the commands you may use\n", a.cfg.CommandPrefix)
	for _, c := range cmds {
		if c.Hidden || !a.may(in, c.Permission) {
			continue
		}
		usage := strings.Replace(c.Usage, "/", a.cfg.CommandPrefix, 1)
		fmt.Fprintf(&b, "%s - %s", usage, c.Description)
		if len(c.Aliases) > 0 {
			fmt.Fprintf(&b, " (also %s)", strings.Join(c.Aliases, ", "))
		}
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// splitWords splits a command line at spaces; "..." or '...' keep a word
// with spaces together.
func splitWords(s string) []string {
	var words []string
	var cur strings.Builder
	var quote rune
	inWord := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case unicode.IsSpace(r):
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// safeCommand runs a plugin's command, turning a panic into an error.
func safeCommand(f func() (string, error)) (s string, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the plugin failed (panic: %v)", v)
		}
	}()
	return f()
}
