// Package pluginhost is the host's side of the plugin SDK: what nekro's
// host and runtime do with plugins that plugin authors never do (bind host
// services, build a method call's Ctx, run hooks, call methods with raw
// JSON, read store options, list registered plugins). Package plugin is
// the authors' side and exports none of it.
package pluginhost

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nekro-go/nekro/internal/pluginbridge"
	"github.com/nekro-go/nekro/internal/pluginconfig"
	"github.com/nekro-go/nekro/plugin"
)

// sdk is package plugin's host-only side: its methods (plugin/bridge.go)
// do what the host may do to plugins and authors may not. It has no
// state; see package pluginbridge for how it is reached.
var sdk = pluginbridge.Host[*plugin.Plugin]()

// ChatSender delivers what a plugin sends to the chat of one run: text,
// files and images, posted as the assistant. (Package plugin names the
// same interface type; plugins reach it only through their Ctx.)
type ChatSender = interface {
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

// RunEnv is what the runtime lends the methods of one run.
type RunEnv struct {
	plugin.RunInfo
	// StoreFor returns the KV store namespace of a plugin. Nil means the run
	// has no store, and Ctx.Store returns one whose calls fail.
	StoreFor func(p *plugin.Plugin) plugin.Store
	// FS is the file bridge of this run's chat and sandbox.
	FS plugin.FS
	// Chat sends messages to this run's chat.
	Chat ChatSender
	// Model answers Ctx.AskModel: group, and the question's parts; nil
	// leaves the run without model access.
	Model func(ctx context.Context, group string, parts []plugin.ContentPart) (string, error)
	// History answers Ctx.History: the latest limit messages of this
	// run's chat, rendered; nil leaves the run without it.
	History func(ctx context.Context, limit int) ([]string, error)
	// Task is set for a background task's Ctx (Progress, WaitNotify).
	Task TaskControl
	// Knowledge answers Ctx.SearchKnowledge for this run's chat (its own
	// documents and the global ones); nil leaves the run without it.
	Knowledge func(ctx context.Context, query string, topK int) ([]plugin.KnowledgePassage, error)
}

// TaskControl is a background task's side of its Ctx: progress reports
// and waits for notifications. (Package plugin names the same type.)
type TaskControl = interface {
	Progress(percent int, message string)
	Wait(ctx context.Context, key string, timeout time.Duration) (string, error)
}

// TaskControl returns the task the Ctx belongs to, or nil.
func (e *RunEnv) TaskControl() TaskControl { return e.Task }

// ChatHistory answers Ctx.History for the run's own chat.
func (e *RunEnv) ChatHistory(ctx context.Context, limit int) ([]string, error) {
	if e.History == nil {
		return nil, plugin.ErrNoService
	}
	return e.History(ctx, limit)
}

// SearchKnowledge searches the knowledge base as the run's chat, if the
// run has it.
func (e *RunEnv) SearchKnowledge(ctx context.Context, query string, topK int) ([]plugin.KnowledgePassage, error) {
	if e.Knowledge == nil {
		return nil, plugin.ErrNoService
	}
	return e.Knowledge(ctx, query, topK)
}

// AskModel asks the run's model access, if any.
func (e *RunEnv) AskModel(ctx context.Context, group string, parts []plugin.ContentPart) (string, error) {
	if e.Model == nil {
		return "", plugin.ErrNoService
	}
	return e.Model(ctx, group, parts)
}

// Info returns the run's identity.
func (e *RunEnv) Info() plugin.RunInfo { return e.RunInfo }

// StoreOf returns p's store for this run, or nil.
func (e *RunEnv) StoreOf(p *plugin.Plugin) plugin.Store {
	if e.StoreFor == nil {
		return nil
	}
	return e.StoreFor(p)
}

// PluginFS is implemented by a file bridge that gives each plugin its own
// view (host paths in its data directory are its own to forward).
type PluginFS interface {
	ForPlugin(pluginKey string) plugin.FS
}

// FilesOf returns the run's file bridge as p sees it, or nil.
func (e *RunEnv) FilesOf(p *plugin.Plugin) plugin.FS {
	if e.FS == nil {
		return nil
	}
	if pf, ok := e.FS.(PluginFS); ok && p != nil {
		return pf.ForPlugin(p.Key())
	}
	return e.FS
}

// Sender returns the run's chat, or nil.
func (e *RunEnv) Sender() ChatSender { return e.Chat }

// NewCtx binds a call of a method of p to a run.
func NewCtx(parent context.Context, p *plugin.Plugin, env *RunEnv) *plugin.Ctx {
	if env == nil {
		env = &RunEnv{}
	}
	return sdk.NewCtx(parent, p, env)
}

// Services is what the host (internal/host) gives a plugin outside any
// run (in its init and cleanup hooks, for instance).
type Services interface {
	// Store returns the plugin's KV namespace.
	Store() plugin.Store
	// DataDir returns the plugin's private directory, data/plugins/<key>/,
	// creating it on first use.
	DataDir() (string, error)
	// Logger returns the host's logger, tagged with the plugin's key.
	Logger() *slog.Logger
	// ConfigJSON returns the plugin's settings in force as a JSON object
	// and their version (it changes whenever they do); nil when the
	// plugin mounted none.
	ConfigJSON() (json.RawMessage, uint64)
	// PushSystem adds a system message to a chat; with trigger a turn
	// answers it.
	PushSystem(ctx context.Context, chatKey, text string, trigger bool) error
	// SetConfig changes the named settings (checked, then kept in the
	// plugin's config.yaml).
	SetConfig(changes map[string]any) error
}

// TimerServices are the services of a host that keeps plugins'
// timers (package schedule); Plugin.SetTimer and its kin fail with
// plugin.ErrNoService where the bound Services lack them.
type TimerServices interface {
	SetTimer(ctx context.Context, chatKey, id string, at time.Time, cron, tz, payload string) (string, error)
	ClearTimer(ctx context.Context, chatKey, id string) (bool, error)
	Timers(ctx context.Context, chatKey string, each func(id string, due time.Time, cron, tz, payload string)) error
}

// TimerHandler returns p's OnTimer handler, or nil.
func TimerHandler(p *plugin.Plugin) func(ctx context.Context, chatKey, id, payload string, late time.Duration) error {
	return sdk.TimerHandler(p)
}

// ServicesOf returns the services bound to p, or nil before the host
// bound it.
func ServicesOf(p *plugin.Plugin) Services {
	if s := sdk.Services(p); s != nil {
		return s
	}
	return nil
}

// ConfigJSON returns p's settings in force and their version; nil when p
// declared none or is not bound.
func ConfigJSON(p *plugin.Plugin) (json.RawMessage, uint64) {
	s := ServicesOf(p)
	if s == nil {
		return nil, 0
	}
	return s.ConfigJSON()
}

// SetConfig changes p's settings.
func SetConfig(p *plugin.Plugin, changes map[string]any) error {
	s := ServicesOf(p)
	if s == nil {
		return fmt.Errorf("plugin %s is not running", p.Key())
	}
	return s.SetConfig(changes)
}

// Bind attaches the host's services to p, before its init hooks run.
func Bind(p *plugin.Plugin, s Services) { sdk.Bind(p, s) }

// Hooks returns p's lifecycle hooks.
func Hooks(p *plugin.Plugin) (init, cleanup []func(ctx context.Context) error, reset []func(ctx context.Context, chatKey string) error) {
	return sdk.Hooks(p)
}

// CommandInfo is a mounted chat command as the host sees it.
type CommandInfo struct {
	plugin.Command
	Plugin *plugin.Plugin
	// Hidden commands answer but are not listed by /help (a Python
	// plugin's internal ones).
	Hidden bool
	// Run answers one use of the command.
	Run func(ctx *plugin.Ctx, call CommandCall) (string, error)
}

// CommandCall is one use of a chat command: the words after its name,
// that text as typed, and who typed it.
type CommandCall = pluginbridge.CommandCall

// CommandWait is a command's question to its sender (CommandCall.Wait).
type CommandWait = pluginbridge.CommandWait

// Commands returns p's chat commands, in mount order.
func Commands(p *plugin.Plugin) []CommandInfo {
	var out []CommandInfo
	for _, c := range sdk.Commands(p) {
		info := CommandInfo{Command: c.Command, Plugin: p, Hidden: sdk.CommandHidden(c),
			Run: func(ctx *plugin.Ctx, call CommandCall) (string, error) { return sdk.RunCommand(c, ctx, call) }}
		info.Aliases = slices.Clone(info.Aliases)
		out = append(out, info)
	}
	return out
}

// MountCommand mounts on p a chat command implemented outside Go (a
// Python plugin's): run parses the call itself. Its names are single
// words (dots and any letters allowed, as a command group's
// "group.sub"); Permission is public, user, admin or super; an empty
// Usage is "/NAME". Hidden leaves it out of /help.
func MountCommand(p *plugin.Plugin, c plugin.Command, hidden bool, run func(ctx *plugin.Ctx, call CommandCall) (string, error)) error {
	c.Aliases = slices.Clone(c.Aliases)
	return sdk.MountRawCommand(p, c, hidden, run)
}

// MessageHooks returns p's OnUserMessage hooks.
func MessageHooks(p *plugin.Plugin) []func(ctx *plugin.Ctx, text string) plugin.Signal {
	return sdk.MessageHooks(p)
}

// SystemMessageHooks returns p's OnSystemMessage hooks.
func SystemMessageHooks(p *plugin.Plugin) []func(ctx *plugin.Ctx, text string) plugin.Signal {
	return sdk.SystemMessageHooks(p)
}

// TurnHooks returns p's OnPromptInject hooks and its OnCollectMethods
// filter (nil when it has none).
func TurnHooks(p *plugin.Plugin) (inject []func(ctx *plugin.Ctx) (string, error), collect func(ctx *plugin.Ctx) []string) {
	return sdk.TurnHooks(p)
}

// StateHooks returns p's OnEnabled and OnDisabled hooks.
func StateHooks(p *plugin.Plugin) (enabled, disabled []func(ctx context.Context) error) {
	return sdk.StateHooks(p)
}

// ConfigSchema returns the schema of p's settings, or nil when it
// declared none.
func ConfigSchema(p *plugin.Plugin) (*pluginconfig.Schema, error) {
	return sdk.ConfigSchema(p)
}

// MountConfigFields declares the settings of a plugin implemented outside
// Go (a Python plugin's ConfigBase), as pluginconfig fields in JSON.
func MountConfigFields(p *plugin.Plugin, fields json.RawMessage) {
	sdk.MountConfigFields(p, fields)
}

// MethodInfo is a mounted sandbox method as the host sees it: its
// description, parameters and result type, and a raw entry point taking
// JSON arguments.
type MethodInfo struct {
	plugin.Method
	plugin *plugin.Plugin
	params []Param
	result string
	call   func(ctx *plugin.Ctx, args map[string]json.RawMessage) (json.RawMessage, error)
	// entry is the method's entry in a turn's prompt, once rendered
	// (PromptEntry).
	entry atomic.Pointer[string]
}

// PromptEntry returns the method's entry in the prompt's list of methods,
// made by render the first time and kept: a method does not change (a
// replaced plugin's methods are new MethodInfos), and every turn lists
// the methods again.
func (m *MethodInfo) PromptEntry(render func(*MethodInfo) string) string {
	if e := m.entry.Load(); e != nil {
		return *e
	}
	e := render(m)
	m.entry.Store(&e)
	return e
}

// Param is one parameter of a sandbox method, from one field of its
// arguments struct.
type Param struct {
	Name     string // Python parameter name (the field's json name)
	Doc      string // from the field's `jsonschema:"..."` tag
	PyType   string // Python type hint, e.g. "int", "list[str]", "Optional[dict]"
	Optional bool   // omitempty or pointer field
	// DefaultPy is the Python literal used as the default ("None" when the
	// field has no `default:"..."` tag); empty for required parameters.
	DefaultPy string
}

// Plugin returns the plugin the method belongs to.
func (m *MethodInfo) Plugin() *plugin.Plugin { return m.plugin }

// Params returns the method's parameters in Python order.
func (m *MethodInfo) Params() []Param { return slices.Clone(m.params) }

// ResultPyType is the Python type hint of the method's result.
func (m *MethodInfo) ResultPyType() string { return m.result }

// MountRaw mounts on p a method implemented outside Go (a Python
// plugin's): its parameters and result type as Python sees them, and a
// call taking and returning JSON. Unknown and missing arguments are
// refused before call runs; an AGENT or BEHAVIOR result must be a JSON
// string, a MULTIMODAL_AGENT one a list of content parts.
func MountRaw(p *plugin.Plugin, m plugin.Method, params []Param, result string,
	call func(ctx *plugin.Ctx, args map[string]json.RawMessage) (json.RawMessage, error)) error {
	ps := make([]pluginbridge.Param, len(params))
	for i, pa := range params {
		ps[i] = pluginbridge.Param(pa)
	}
	return sdk.MountRaw(p, m, ps, result, call)
}

// methodInfos keeps one MethodInfo per mounted method, so the same method
// is always the same pointer (the runtime compares them).
var methodInfos sync.Map // plugin's *mountedMethod -> *MethodInfo

// Methods returns p's sandbox methods in the order they were mounted.
func Methods(p *plugin.Plugin) []*MethodInfo {
	var out []*MethodInfo
	for _, m := range sdk.Methods(p) {
		if mi, ok := methodInfos.Load(m); ok {
			out = append(out, mi.(*MethodInfo))
			continue
		}
		mi := &MethodInfo{Method: m.Method, plugin: p, result: sdk.MethodResult(m),
			call: func(ctx *plugin.Ctx, args map[string]json.RawMessage) (json.RawMessage, error) {
				return sdk.Call(m, ctx, args)
			}}
		for _, pa := range sdk.MethodParams(m) {
			mi.params = append(mi.params, Param(pa))
		}
		actual, _ := methodInfos.LoadOrStore(m, mi)
		out = append(out, actual.(*MethodInfo))
	}
	return out
}

// Call calls m with the run's ctx and the arguments as the sandbox sent
// them, and returns the result encoded. A wrong argument is a
// *plugin.ArgumentError; the method's own error is returned unchanged.
// Call does not recover panics: the caller (the RPC server) does.
func Call(m *MethodInfo, ctx *plugin.Ctx, args map[string]json.RawMessage) (json.RawMessage, error) {
	return m.call(ctx, args)
}

// SetOptions is what a list of plugin.SetOption amounts to.
type SetOptions struct {
	// ExpiresAt is when the value stops existing; zero means never.
	ExpiresAt time.Time
	// TTL, when HasTTL, sets the expiry to the time of the write plus TTL.
	TTL    time.Duration
	HasTTL bool
	// Expiry is true when an option set ExpiresAt or TTL.
	Expiry bool
}

// ApplySetOptions folds opts into one SetOptions.
func ApplySetOptions(opts []plugin.SetOption) SetOptions {
	return SetOptions(sdk.SetOptions(opts))
}

// ScopeOf is the KV scope a (chat key, user key) pair names, as the
// reference's plugin.store and `nekro kv` name it: both set is the user in
// that chat, one alone its own scope, neither the plugin's own.
func ScopeOf(chatKey, userKey string) plugin.Scope {
	switch {
	case chatKey != "" && userKey != "":
		return plugin.ChatUser(chatKey, userKey)
	case chatKey != "":
		return plugin.Chat(chatKey)
	case userKey != "":
		return plugin.User(userKey)
	}
	return plugin.Global()
}

// Registered returns every registered plugin, sorted by key.
func Registered() []*plugin.Plugin { return sdk.Registered() }

// Lookup returns the registered plugin with the given key.
func Lookup(key string) (*plugin.Plugin, error) {
	for _, p := range Registered() {
		if p.Key() == key {
			return p, nil
		}
	}
	return nil, fmt.Errorf("unknown plugin %s (not compiled in? import it in plugins/all)", key)
}
