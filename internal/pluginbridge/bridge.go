// Package pluginbridge lets internal/pluginhost reach the parts of package
// plugin that only the host uses, without exporting them to plugin
// authors (package plugin is their face; pluginhost the host's, as
// database/sql/driver and database/sql are). Package plugin fills these
// in at init; only pluginhost calls them, and it restores their types.
// Nothing else may use this package.
package pluginbridge

import (
	"context"
	"encoding/json"
	"time"
)

// Set by package plugin's init. Arguments and results typed any are
// plugin's own types, named in each comment.
var (
	// NewCtx(parent, *plugin.Plugin, env) *plugin.Ctx; env has the methods
	// of pluginhost.RunEnv.
	NewCtx func(parent context.Context, p any, env any) any
	// Bind(*plugin.Plugin, services): services has the methods of
	// pluginhost.Services.
	Bind func(p any, services any)
	// Hooks(*plugin.Plugin) (init, cleanup []func(context.Context) error,
	// reset []func(context.Context, string) error).
	Hooks func(p any) (init, cleanup, reset any)
	// Commands(*plugin.Plugin) lists its chat commands, in mount order.
	Commands func(p any) []CommandData
	// MessageHooks(*plugin.Plugin) []func(*plugin.Ctx, string) plugin.Signal.
	MessageHooks func(p any) any
	// SystemMessageHooks(*plugin.Plugin), as MessageHooks for system messages.
	SystemMessageHooks func(p any) any
	// TurnHooks(*plugin.Plugin) (inject []func(*plugin.Ctx) (string, error),
	// collect func(*plugin.Ctx) []string).
	TurnHooks func(p any) (inject, collect any)
	// StateHooks(*plugin.Plugin) (enabled, disabled []func(context.Context) error).
	StateHooks func(p any) (enabled, disabled any)
	// Methods(*plugin.Plugin) lists its mounted methods, in mount order.
	Methods func(p any) []MethodData
	// Call(entry, *plugin.Ctx, args) calls the method of a MethodData.Entry.
	Call func(m any, ctx any, args map[string]json.RawMessage) (json.RawMessage, error)
	// SetOptions([]plugin.SetOption) folds the options.
	SetOptions func(opts any) (expiresAt time.Time, ttl time.Duration, hasTTL, expiry bool)
	// ConfigDecl(*plugin.Plugin) returns MountConfig's defaults (a Go
	// struct value) or a raw plugin's fields (JSON), or neither.
	ConfigDecl func(p any) (defaults any, fields json.RawMessage)
	// MountConfigFields(*plugin.Plugin, fields) declares a raw plugin's
	// settings.
	MountConfigFields func(p any, fields json.RawMessage)
	// TimerHandler(*plugin.Plugin) returns its OnTimer handler,
	// func(ctx, chatKey, id, payload string, late time.Duration) error, or
	// a nil one.
	TimerHandler func(p any) any
	// Services(*plugin.Plugin) returns what Bind bound, or nil.
	Services func(p any) any
	// Registered() []*plugin.Plugin, sorted by key.
	Registered func() any
	// MountRaw(*plugin.Plugin, plugin.Method, params, result, call) mounts
	// a method implemented outside Go; call's ctx is a *plugin.Ctx.
	MountRaw func(p any, m any, params []ParamData, result string,
		call func(ctx any, args map[string]json.RawMessage) (json.RawMessage, error)) error
)

// MethodData is a mounted method as plugin describes it to the host.
type MethodData struct {
	Method       any // plugin.Method
	Params       []ParamData
	ResultPyType string
	Entry        any // plugin's own; what Call takes
}

// ParamData is one parameter of a method.
type ParamData struct {
	Name, Doc, PyType string
	Optional          bool
	DefaultPy         string
}

// CommandData is a mounted chat command as plugin describes it to the
// host: its fields of plugin.Command, and how to run it (ctx is a
// *plugin.Ctx).
type CommandData struct {
	Name, Description, Usage, Permission string
	Aliases                              []string
	Run                                  func(ctx any, words []string) (string, error)
}
