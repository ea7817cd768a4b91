package plugin

import (
	"context"
	"fmt"
	"io"
	"path"
)

// chatSender delivers what a plugin sends to the chat of one run
// (pluginhost.ChatSender, the same type). The host binds one to every run
// of a chat; plugins reach it through Ctx.SendText, Ctx.SendFile and
// Ctx.SendImage, never directly, so a plugin can only write into the chat
// whose run called it.
type chatSender = interface {
	// SendText posts text to the chat as the assistant.
	SendText(ctx context.Context, text string) error
	// SendFile posts content as a file attachment called name.
	SendFile(ctx context.Context, name string, content io.Reader) error
	// SendImage posts content as an image attachment called name; content
	// that is not an image is refused.
	SendImage(ctx context.Context, name string, content io.Reader) error
	// AddSystem records text as a system message of the chat; with wake
	// a turn answers it.
	AddSystem(ctx context.Context, text string, wake bool) error
}

// SendText posts text to the run's chat as the assistant's message.
func (c *Ctx) SendText(text string) error {
	if c.env.Sender() == nil {
		return fmt.Errorf("send text: %w", ErrNoService)
	}
	return c.env.Sender().SendText(c, text)
}

// SendFile posts the file at a sandbox path (/app/shared/... or
// /app/uploads/..., or the same relative to /app) to the run's chat as an
// attachment. Other paths are refused, as FS.Open refuses them.
func (c *Ctx) SendFile(sandboxPath string) error {
	return c.sendPath(sandboxPath, false)
}

// SendImage posts the image at a sandbox path to the run's chat. Paths are
// checked as in SendFile; a file that is not an image is refused.
func (c *Ctx) SendImage(sandboxPath string) error {
	return c.sendPath(sandboxPath, true)
}

func (c *Ctx) sendPath(sandboxPath string, image bool) error {
	op := "send file"
	if image {
		op = "send image"
	}
	if c.env.Sender() == nil {
		return fmt.Errorf("%s: %w", op, ErrNoService)
	}
	f, err := c.FS().Open(sandboxPath)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer f.Close()
	name := path.Base(sandboxPath)
	if image {
		return c.env.Sender().SendImage(c, name, f)
	}
	return c.env.Sender().SendFile(c, name, f)
}

// AskModel asks one of the operator's model groups ("chat", the one that
// answers turns, when group is ""; "vision" and others as the operator
// configures them) a single question made of text and images, and returns
// its answer: what vision, summary and translation plugins need. The
// request counts toward the turn's model use. Outside a turn or run (a
// hook, a command) it is unavailable (ErrNoService).
func (c *Ctx) AskModel(group string, parts ...ContentPart) (string, error) {
	if group == "" {
		group = "chat"
	}
	answer, err := c.env.AskModel(c, group, parts)
	if err != nil {
		return "", fmt.Errorf("ask model group %s: %w", group, err)
	}
	return answer, nil
}

// History returns the latest limit messages of the run's own chat (never
// another's), oldest first, each as the AI reads it in the prompt:
// "[#id time] name (user id ...): text". Unavailable outside a run or
// turn (ErrNoService).
func (c *Ctx) History(limit int) ([]string, error) {
	h, err := c.env.ChatHistory(c, limit)
	if err != nil {
		return nil, fmt.Errorf("chat history: %w", err)
	}
	return h, nil
}

// PushSystem adds text to the run's chat as a system message, for the
// AI: it reads it in its next request. With trigger, a turn runs for it
// as for a user's message (after the current one, if any), so a plugin
// can wake the agent. The plugins' OnSystemMessage hooks screen it first.
func (c *Ctx) PushSystem(text string, trigger bool) error {
	if c.env.Sender() == nil {
		return fmt.Errorf("push system message: %w", ErrNoService)
	}
	return c.env.Sender().AddSystem(c, text, trigger)
}
