package plugin

import (
	"context"
)

// RunInfo is the identity of one sandbox run. The host fixes it when the run
// starts; nothing the sandboxed code sends can change it.
type RunInfo struct {
	RunID        string // unique per run
	ChatKey      string // the chat the run answers
	UserID       string // the user whose message started the run; may be empty
	ContainerKey string // the sandbox whose /app/shared the run sees
}

// runEnv is what the runtime lends the methods of one run
// (*pluginhost.RunEnv implements it).
type runEnv interface {
	Info() RunInfo
	StoreOf(p *Plugin) Store
	FilesOf(p *Plugin) FS
	Sender() chatSender
	AskModel(ctx context.Context, group string, parts []ContentPart) (string, error)
	ChatHistory(ctx context.Context, limit int) ([]string, error)
	SearchKnowledge(ctx context.Context, query string, topK int) ([]KnowledgePassage, error)
	// TaskControl is a background task's side of its Ctx; nil elsewhere.
	TaskControl() taskControl
}

// Ctx is what a sandbox method receives. It is a context.Context, cancelled
// when the call's deadline passes or the run ends, and it carries the run's
// identity and the plugin's view of the host's services.
type Ctx struct {
	context.Context
	plugin *Plugin
	env    runEnv
	info   RunInfo
}

func newCtx(parent context.Context, p *Plugin, env runEnv) *Ctx {
	return &Ctx{Context: parent, plugin: p, env: env, info: env.Info()}
}

// Plugin returns the plugin whose method is running.
func (c *Ctx) Plugin() *Plugin { return c.plugin }

// ChatKey returns the key of the run's chat.
func (c *Ctx) ChatKey() string { return c.info.ChatKey }

// UserID returns the id of the user whose message started the run, or ""
// when the run has no user (e.g. a timer).
func (c *Ctx) UserID() string { return c.info.UserID }

// ContainerKey returns the key of the run's sandbox.
func (c *Ctx) ContainerKey() string { return c.info.ContainerKey }

// RunID returns the run's unique id.
func (c *Ctx) RunID() string { return c.info.RunID }

// Run returns the run's identity.
func (c *Ctx) Run() RunInfo { return c.info }
