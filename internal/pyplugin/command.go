package pyplugin

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/plugin"
)

// CommandTimeout bounds one use of a Python plugin's chat command: the
// sender waits for its answer. A command still running then is answered
// with a failure; the process is not restarted for it (it may be waiting
// on a slow service), and the command's late answer is dropped.
const CommandTimeout = time.Minute

// commandBody is a command's request to the process.
type commandBody struct {
	Name  string     `json:"name"`
	Args  string     `json:"args"`  // the text after the command's name
	Usage string     `json:"usage"` // shown with an argument error
	Ctx   commandCtx `json:"ctx"`
}

// commandCtx is what the process builds the CommandExecutionContext from.
type commandCtx struct {
	ChatKey       string  `json:"chat_key"`
	UserID        string  `json:"user_id"`
	UserName      string  `json:"user_name"`
	SuperUser     bool    `json:"super_user"`
	Admin         bool    `json:"admin"`
	ConfigVersion *uint64 `json:"config_version,omitempty"`
}

// commandResponse is one CommandResponse the command returned or
// yielded (CmdCtl.message, .success, .failed, .wait).
type commandResponse struct {
	Status   string `json:"status"`
	Message  string `json:"message"`
	Segments []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		FileName string `json:"file_name"`
		// Data is an image or file segment's content, read by the
		// plugin's process (absent when it could not or it was too large).
		Data []byte `json:"data"`
	} `json:"segments"`
	// Wait is CmdCtl.wait's question, nil for other responses.
	Wait *struct {
		Callback       string            `json:"callback_cmd"`
		Options        []string          `json:"options"`
		Timeout        float64           `json:"timeout"` // seconds
		TimeoutMessage string            `json:"on_timeout_message"`
		ContextData    map[string]string `json:"context_data"`
	} `json:"wait"`
}

// wait is r's question as nekro's command system keeps it: the context
// data appended to the answer's text as key:"value" words, as the
// reference passes it to the callback command.
func (r commandResponse) wait() pluginhost.CommandWait {
	w := pluginhost.CommandWait{Callback: r.Wait.Callback, TimeoutMessage: r.Wait.TimeoutMessage,
		Timeout: time.Duration(r.Wait.Timeout * float64(time.Second))}
	if w.Timeout <= 0 {
		w.Timeout = time.Minute
	}
	keys := slices.Sorted(maps.Keys(r.Wait.ContextData))
	extra := make([]string, 0, len(keys))
	for _, k := range keys {
		extra = append(extra, fmt.Sprintf("%s:%q", k, r.Wait.ContextData[k]))
	}
	w.Extra = strings.Join(extra, " ")
	return w
}

// failed reports whether the response ends the command in failure, as
// the reference's statuses say.
func (r commandResponse) failed() bool {
	switch r.Status {
	case "error", "invalid_args", "unauthorized", "not_found", "disabled":
		return true
	}
	return false
}

// text is the response as one chat message: its message, then its text
// segments; an image or file segment is named (nekro posts a command's
// text only).
func (r commandResponse) text() string {
	parts := []string{}
	if m := strings.TrimSpace(r.Message); m != "" {
		parts = append(parts, m)
	}
	for _, s := range r.Segments {
		switch {
		case s.Type == "text" && strings.TrimSpace(s.Text) != "":
			parts = append(parts, strings.TrimSpace(s.Text))
		case s.Type != "text" && s.FileName != "" && s.Data == nil:
			parts = append(parts, fmt.Sprintf("[%s %s]", s.Type, s.FileName))
		}
	}
	return strings.Join(parts, "\n")
}

// command runs one use of the chat command c in the process: the
// process parses call.Line by the function's Arg declarations and runs
// it with a CommandExecutionContext of the sender. Its responses, in
// order, are the answer, a line each; one with a failure status makes
// the answer an error (the agent posts "/name failed: ...").
func (h *host) command(ctx *plugin.Ctx, c plugin.Command, call pluginhost.CommandCall) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, CommandTimeout)
	defer cancel()
	token := rand.Text()
	h.mu.Lock()
	h.calls[token] = ctx // the plugin's store calls act for the sender's chat
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.calls, token)
		h.mu.Unlock()
	}()
	cc := commandCtx{ChatKey: ctx.ChatKey(), UserID: ctx.UserID(), UserName: call.UserName, SuperUser: call.SuperUser, Admin: call.Admin}
	if raw, version := pluginhost.ConfigJSON(h.plugin); raw != nil {
		cc.ConfigVersion = &version
	}
	body, _ := json.Marshal(commandBody{Name: c.Name, Args: call.Line, Usage: c.Usage, Ctx: cc})
	raw, err := h.request(cctx, message{Op: "command", Args: body}, token)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return "", fmt.Errorf("the plugin did not answer within %s", CommandTimeout)
		}
		return "", err
	}
	var out struct {
		Responses []commandResponse `json:"responses"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", fmt.Errorf("plugin %s: bad command answer: %w", h.plugin.Key(), err)
	}
	var lines []string
	failed := false
	var wait *commandResponse
	for i := range out.Responses {
		r := &out.Responses[i]
		// Image and file segments go with the answer, where the caller
		// takes files; otherwise they are named in its text.
		for j := range r.Segments {
			seg := &r.Segments[j]
			if seg.Data == nil || seg.Type == "text" {
				continue
			}
			kind := "file"
			if seg.Type == "image" {
				kind = "image"
			}
			if call.Attach == nil {
				seg.Data = nil
			} else if err := call.Attach(seg.FileName, kind, bytes.NewReader(seg.Data)); err != nil {
				h.log.Info("a command's file was not attached", "file", seg.FileName, "err", err)
				seg.Data = nil
			}
		}
		t := r.text()
		if r.Wait != nil && len(r.Wait.Options) > 0 {
			t = strings.TrimSpace(t + "\n" + "Options: " + strings.Join(r.Wait.Options, " / "))
		}
		if t != "" {
			lines = append(lines, t)
		}
		failed = failed || r.failed()
		if r.Wait != nil && r.Wait.Callback != "" {
			wait = r
		}
	}
	// The last question asked is the one the sender's next message
	// answers, unless the command failed.
	if wait != nil && !failed && call.Wait != nil {
		call.Wait(wait.wait())
	}
	text := strings.Join(lines, "\n")
	if failed {
		if text == "" {
			text = "the plugin gave no reason"
		}
		return "", errors.New(text)
	}
	return text, nil
}
