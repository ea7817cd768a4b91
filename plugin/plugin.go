// Package plugin is the SDK for nekro plugin authors.
//
// A plugin is a Go value built and registered in an init function, the way
// database/sql drivers are:
//
//	var p = plugin.New(plugin.Meta{
//		Name: "Calculator", ModuleName: "calc", Author: "alice",
//		Version: "1.0.0", Description: "Arithmetic for the AI", URL: "https://example.org",
//	})
//
//	type SumArgs struct {
//		Num1 int `json:"num1" jsonschema:"the first addend"`
//		Num2 int `json:"num2" jsonschema:"the second addend"`
//	}
//
//	func init() {
//		plugin.MountSandboxMethod(p, plugin.Method{
//			Type: plugin.Tool, Name: "my_sum_function",
//			Description: "Adds two integers.",
//			Doc: "Add two integers.\n\nReturns:\n    int: the sum.",
//		}, func(ctx *plugin.Ctx, a SumArgs) (int, error) { return a.Num1 + a.Num2, nil })
//		plugin.Register(p)
//	}
//
// The AI's Python code then calls my_sum_function(2, 3) inside its sandbox;
// the call crosses the run's private socket, the arguments are checked
// against SumArgs, and the method runs in the host process.
//
// # Lifecycle
//
// A plugin lives through these steps, in order:
//
//  1. init(): plugin.New, MountSandboxMethod, the On* hooks and Register.
//     This step does no I/O: mistakes (bad names, bad types) panic here,
//     so they surface when the binary starts, not when the AI calls.
//  2. OnInit hooks run once the host's store and data directory are ready,
//     before the first sandbox run. A failing init disables only that plugin
//     (its cleanup still runs) and the reason is logged.
//  3. Sandbox methods are called, each with a *Ctx bound to one run.
//  4. OnChannelReset hooks run when a chat is reset.
//  5. OnCleanup hooks run at shutdown, also after a failed init.
package plugin

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/nekro-go/nekro/internal/keys"
)

// Meta describes a plugin. Its key, Author + "." + ModuleName, names the
// plugin everywhere: in the enabled list, the KV store and the data
// directory (data/plugins/<key>/).
type Meta struct {
	Name        string // display name
	ModuleName  string // letters, digits and _, not starting with a digit
	Author      string // same rule as ModuleName
	Version     string
	Description string
	// URL is the plugin's home page (its repository or documentation),
	// linked from the web UI's plugins page when set. Leave it empty
	// rather than guess: a link to nowhere misleads the operator.
	URL string
}

// Key returns the plugin's unique key, "author.module_name".
func (m Meta) Key() string { return m.Author + "." + m.ModuleName }

// Plugin is one registered plugin: its metadata, sandbox methods and hooks.
// Build it with New; it is safe for concurrent use once registered.
type Plugin struct {
	bridgeCore // lets internal/pluginhost call hostSide (plugin/bridge.go)

	meta    Meta
	methods []*mountedMethod

	onInit         []func(ctx context.Context) error
	onCleanup      []func(ctx context.Context) error
	onChannelReset []func(ctx context.Context, chatKey string) error
	onEnabled      []func(ctx context.Context) error
	onDisabled     []func(ctx context.Context) error
	onPrompt       []func(ctx *Ctx) (string, error)
	collect        func(ctx *Ctx) []string
	onUserMessage  []func(ctx *Ctx, text string) Signal
	onSystemMsg    []func(ctx *Ctx, text string) Signal
	commands       []*mountedCommand
	web            webMounts // MountWebhook's and MountRoutes'

	mu      sync.RWMutex
	host    hostServices // set by the host before init hooks run
	config  *configDecl  // MountConfig's
	onTimer func(ctx context.Context, chatKey, id, payload string, late time.Duration) error
}

// New validates meta and returns a plugin ready for methods and hooks.
// It panics when ModuleName or Author is not a valid identifier.
func New(meta Meta) *Plugin {
	if !keys.Ident(meta.ModuleName) {
		panic(fmt.Sprintf("plugin: module name %q must be letters, digits and _, not starting with a digit", meta.ModuleName))
	}
	if !keys.Ident(meta.Author) {
		panic(fmt.Sprintf("plugin %s: author %q must be letters, digits and _, not starting with a digit", meta.ModuleName, meta.Author))
	}
	if meta.Name == "" {
		meta.Name = meta.ModuleName
	}
	return &Plugin{meta: meta}
}

// Meta returns the plugin's metadata.
func (p *Plugin) Meta() Meta { return p.meta }

// Key returns "author.module_name".
func (p *Plugin) Key() string { return p.meta.Key() }

// OnInit adds a hook run once, after the store, data directory and
// settings are ready and before the first sandbox run.
func (p *Plugin) OnInit(f func(ctx context.Context) error) { p.onInit = append(p.onInit, f) }

// OnCleanup adds a hook run at shutdown, and after a failed init.
func (p *Plugin) OnCleanup(f func(ctx context.Context) error) { p.onCleanup = append(p.onCleanup, f) }

// OnChannelReset adds a hook run when the chat chatKey is reset.
func (p *Plugin) OnChannelReset(f func(ctx context.Context, chatKey string) error) {
	p.onChannelReset = append(p.onChannelReset, f)
}

// OnEnabled adds a hook run when the operator enables the plugin while
// nekro runs (after its init hooks, if they had not run yet).
func (p *Plugin) OnEnabled(f func(ctx context.Context) error) { p.onEnabled = append(p.onEnabled, f) }

// OnDisabled adds a hook run when the operator disables the plugin while
// nekro runs: its methods are already out of prompts and calls. Cleanup
// hooks still run at shutdown.
func (p *Plugin) OnDisabled(f func(ctx context.Context) error) {
	p.onDisabled = append(p.onDisabled, f)
}

// OnPromptInject adds live state to the prompt of every turn while the
// plugin is enabled: f's text goes into the chat's history header in a
// block of the plugin's own (<plugin_runtime_context>), so the system
// prompt stays cacheable. ctx carries the turn's chat and user (no
// sandbox: FS and sending are unavailable). f must answer within 2 s
// and is cut at 4 KiB; a slow or failing f is left out of that turn,
// with a note in the log, and never holds the turn up.
func (p *Plugin) OnPromptInject(f func(ctx *Ctx) (string, error)) { p.onPrompt = append(p.onPrompt, f) }

// OnCollectMethods chooses, per chat, which of the plugin's methods the
// AI sees and can call: f returns their Python names (unknown names are
// ignored); the others are left out of the turn's prompt and stubs, and
// calls to them are refused. ctx is as for OnPromptInject. A plugin has
// one filter; a second call replaces the first.
func (p *Plugin) OnCollectMethods(f func(ctx *Ctx) []string) { p.collect = f }

// Signal is a message hook's verdict on a user's message (OnUserMessage).
// Across plugins, any BlockAll wins, then any ForceTrigger, then the
// largest, as in the reference.
type Signal int

// Message hook verdicts, with the reference's values.
const (
	Continue     Signal = 0  // store the message and answer it as usual
	BlockTrigger Signal = 1  // store it in the history, start no turn
	BlockAll     Signal = 2  // drop it: not stored, not answered
	ForceTrigger Signal = -1 // answer it even where the bot would stay quiet
)

// OnUserMessage adds a hook that sees every user message before it is
// stored, with the sender as ctx.UserID() and the chat as ctx.ChatKey()
// (no sandbox); its Signal decides what happens to the message. A hook
// that panics or takes over 2 s counts as Continue.
func (p *Plugin) OnUserMessage(f func(ctx *Ctx, text string) Signal) {
	p.onUserMessage = append(p.onUserMessage, f)
}

// OnSystemMessage adds a hook that sees every system message pushed into
// a chat (a plugin's Ctx.PushSystem or Plugin.PushSystem) before it is stored; BlockAll
// drops it. Bounded and combined as OnUserMessage's.
func (p *Plugin) OnSystemMessage(f func(ctx *Ctx, text string) Signal) {
	p.onSystemMsg = append(p.onSystemMsg, f)
}

// The registry of compiled-in plugins: the only global state of nekro.
var (
	registryMu sync.RWMutex
	registry   = map[string]*Plugin{}
)

// Register makes p available to the runtime. Call it from init().
// It panics on a nil plugin or a key already registered.
func Register(p *Plugin) {
	if p == nil {
		panic("plugin: Register of a nil plugin")
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[p.Key()]; dup {
		panic(fmt.Sprintf("plugin: Register called twice for plugin %s", p.Key()))
	}
	registry[p.Key()] = p
}

func registered() []*Plugin {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]*Plugin, 0, len(registry))
	for _, p := range registry {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}
