package plugin

import (
	"context"
	"fmt"
	"time"
)

// taskHost is the part of the host's services that runs background tasks
// (pluginhost.TaskServices).
type taskHost interface {
	StartTask(ctx context.Context, chatKey, id string, fn func(ctx *Ctx) error) error
	CancelTask(chatKey, id string) bool
	NotifyTask(chatKey, id, key, data string) bool
}

// taskControl is what a task's Ctx reaches (pluginhost.TaskControl, the
// same interface type).
type taskControl = interface {
	Progress(percent int, message string)
	Wait(ctx context.Context, key string, timeout time.Duration) (string, error)
}

func (p *Plugin) tasks() (taskHost, error) {
	h, ok := p.services().(taskHost)
	if !ok {
		return nil, fmt.Errorf("background tasks: %w", ErrNoService)
	}
	return h, nil
}

// StartTask runs fn in the background for the chat chatKey, as task id:
// long work that reports back (a download, a build, a game). While it
// runs, another task with the same id in that chat is refused. fn's ctx
// carries the chat (ctx.ChatKey()), its store, ctx.Progress to say how
// far it is (GET /api/tasks lists tasks), ctx.WaitNotify to wait for
// NotifyTask, and ctx.PushSystem to tell the agent (with trigger, a turn
// answers). It is cancelled by CancelTask, when the plugin is disabled
// and at shutdown. Inside a sandbox method pass ctx.ChatKey().
func (p *Plugin) StartTask(ctx context.Context, chatKey, id string, fn func(ctx *Ctx) error) error {
	h, err := p.tasks()
	if err != nil {
		return err
	}
	return h.StartTask(ctx, chatKey, id, fn)
}

// CancelTask cancels the chat's running task id; false when none runs.
func (p *Plugin) CancelTask(chatKey, id string) bool {
	h, err := p.tasks()
	return err == nil && h.CancelTask(chatKey, id)
}

// NotifyTask hands data to the chat's task id waiting on key
// (ctx.WaitNotify); false when no such task waits for it.
func (p *Plugin) NotifyTask(chatKey, id, key, data string) bool {
	h, err := p.tasks()
	return err == nil && h.NotifyTask(chatKey, id, key, data)
}

// Progress reports how far a background task is (0-100) and what it is
// doing. In a method called over MCP with a progress token, the client
// gets it as a progress notification; anywhere else it does nothing.
func (c *Ctx) Progress(percent int, message string) {
	if t := c.task(); t != nil {
		t.Progress(percent, message)
	}
}

// WaitNotify waits, in a background task, until NotifyTask hands it data
// under key, the timeout passes or the task is cancelled.
func (c *Ctx) WaitNotify(key string, timeout time.Duration) (string, error) {
	if t := c.task(); t != nil {
		return t.Wait(c, key, timeout)
	}
	return "", fmt.Errorf("wait for a notification: %w (only a background task waits)", ErrNoService)
}

// task returns the control of the background task c belongs to, or nil.
func (c *Ctx) task() taskControl {
	if c.env == nil {
		return nil
	}
	return c.env.TaskControl()
}
