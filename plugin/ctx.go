package plugin

import (
	"context"
	"errors"
)

// RunInfo is the identity of one sandbox run. The host fixes it when the run
// starts; nothing the sandboxed code sends can change it.
type RunInfo struct {
	RunID        string // unique per run
	ChatKey      string // the chat the run answers
	UserID       string // the user whose message started the run; may be empty
	ContainerKey string // the sandbox whose /app/shared the run sees
}

// RunEnv is what the runtime lends the methods of one run. Plugin authors
// never build it; tests of plugins may.
type RunEnv struct {
	RunInfo
	// StoreFor returns the KV store namespace of a plugin. Nil means the run
	// has no store, and Ctx.Store returns one whose calls fail.
	StoreFor func(p *Plugin) Store
	// FS is the file bridge of this run's chat and sandbox.
	FS FS
	// Chat sends messages to this run's chat.
	Chat ChatSender
}

// Ctx is what a sandbox method receives. It is a context.Context, cancelled
// when the call's deadline passes or the run ends, and it carries the run's
// identity and the plugin's view of the host's services.
type Ctx struct {
	context.Context
	plugin *Plugin
	env    *RunEnv
}

// NewCtx binds a call of a method of p to a run. The runtime calls it.
func NewCtx(parent context.Context, p *Plugin, env *RunEnv) *Ctx {
	return &Ctx{Context: parent, plugin: p, env: env}
}

// Plugin returns the plugin whose method is running.
func (c *Ctx) Plugin() *Plugin { return c.plugin }

// ChatKey returns the key of the run's chat.
func (c *Ctx) ChatKey() string { return c.env.ChatKey }

// UserID returns the id of the user whose message started the run, or ""
// when the run has no user (e.g. a timer).
func (c *Ctx) UserID() string { return c.env.UserID }

// ContainerKey returns the key of the run's sandbox.
func (c *Ctx) ContainerKey() string { return c.env.ContainerKey }

// RunID returns the run's unique id.
func (c *Ctx) RunID() string { return c.env.RunID }

// Run returns the run's identity.
func (c *Ctx) Run() RunInfo { return c.env.RunInfo }

// ErrNoService is returned by services the runtime did not provide.
var ErrNoService = errors.New("service not available in this runtime")
