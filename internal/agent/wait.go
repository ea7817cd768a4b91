package agent

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/plugin"
)

// commandWaits are the questions commands asked their senders (Nekro
// Agent's CmdCtl.wait), one per chat and user, as the reference keys its
// wait sessions. They live in this process: a question asked on one
// replica is answered by a message that reaches the same replica (a
// platform's connection is held by one replica at a time).
type commandWaits struct {
	mu sync.Mutex
	m  map[waitKey]*pendingWait
}

type waitKey struct{ chat, user string }

// pendingWait is one question: the command that answers it, of the
// plugin that asked.
type pendingWait struct {
	w      pluginhost.CommandWait
	plugin *plugin.Plugin
	timer  *time.Timer
}

// ask records a command's question to in's sender, replacing one it had
// pending in the chat. When w.Timeout passes unanswered, the question
// goes and w.TimeoutMessage is posted in the chat.
func (a *Agent) ask(in Incoming, p *plugin.Plugin, w pluginhost.CommandWait) {
	k := waitKey{in.ChatKey, in.UserID}
	pw := &pendingWait{w: w, plugin: p}
	a.waits.mu.Lock()
	defer a.waits.mu.Unlock()
	if a.waits.m == nil {
		a.waits.m = map[waitKey]*pendingWait{}
	}
	if old := a.waits.m[k]; old != nil {
		old.timer.Stop()
	}
	a.waits.m[k] = pw
	pw.timer = time.AfterFunc(w.Timeout, func() {
		a.waits.mu.Lock()
		current := a.waits.m[k] == pw
		if current {
			delete(a.waits.m, k)
		}
		a.waits.mu.Unlock()
		if !current || w.TimeoutMessage == "" || a.base.Err() != nil {
			return
		}
		if _, err := a.chats.AddMessage(a.base, chat.Message{ChatKey: k.chat, Role: chat.Assistant, SenderID: chat.AssistantID,
			SenderName: "assistant", Text: chat.TruncateText(w.TimeoutMessage)}); err != nil {
			a.log.Info("a command's question timed out; its message was not posted", "chat", k.chat, "err", err)
		}
	})
}

// takeWait removes and returns the question pending for in's sender in
// its chat, nil when there is none.
func (a *Agent) takeWait(in Incoming) *pendingWait {
	k := waitKey{in.ChatKey, in.UserID}
	a.waits.mu.Lock()
	defer a.waits.mu.Unlock()
	pw := a.waits.m[k]
	if pw != nil {
		pw.timer.Stop()
		delete(a.waits.m, k)
	}
	return pw
}

// answerWait runs the command that answers pw with in's text (then the
// question's extra words) as its arguments. ok is false when that
// command is gone (its plugin turned off or reloaded without it): the
// message then goes on as any other.
func (a *Agent) answerWait(ctx context.Context, in Incoming, pw *pendingWait) (answer commandAnswer, ok bool) {
	cmds := a.commands()
	var c *pluginhost.CommandInfo
	for i := range cmds {
		if named(cmds[i], pw.w.Callback) && (c == nil || cmds[i].Plugin == pw.plugin) {
			c = &cmds[i]
		}
	}
	if c == nil {
		return commandAnswer{}, false
	}
	line := strings.TrimSpace(strings.TrimSpace(in.Text) + " " + pw.w.Extra)
	return a.runCommand(ctx, in, *c, pw.w.Callback, splitWords(line), line), true
}
