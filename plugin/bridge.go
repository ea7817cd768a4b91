package plugin

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/nekro-go/nekro/internal/pluginbridge"
	"github.com/nekro-go/nekro/internal/pluginconfig"
)

// bridgeCore, embedded in Plugin, names hostSide for internal/pluginhost
// (see package pluginbridge); authors see only an unexported field.
type bridgeCore = pluginbridge.Core[hostSide]

// hostSide is what internal/pluginhost does to plugins and authors
// cannot: its exported methods are the whole boundary between the SDK's
// two faces. pluginhost reaches it as pluginbridge.Host[*Plugin](), so
// every call is typed here and there. A new host-only need is a method
// here and its caller in pluginhost.
type hostSide struct{}

// NewCtx binds a call of one of p's methods (p may be nil) to a run.
func (hostSide) NewCtx(parent context.Context, p *Plugin, env runEnv) *Ctx {
	return newCtx(parent, p, env)
}

// Bind attaches the runtime's services to p, before its init hooks run.
func (hostSide) Bind(p *Plugin, s hostServices) { p.bind(s) }

// Services returns what Bind bound to p, or nil.
func (hostSide) Services(p *Plugin) hostServices { return p.services() }

// Registered returns every registered plugin, sorted by key.
func (hostSide) Registered() []*Plugin { return registered() }

// Hooks returns p's OnInit, OnCleanup and OnChannelReset hooks.
func (hostSide) Hooks(p *Plugin) (init, cleanup []func(ctx context.Context) error, reset []func(ctx context.Context, chatKey string) error) {
	return slices.Clone(p.onInit), slices.Clone(p.onCleanup), slices.Clone(p.onChannelReset)
}

// StateHooks returns p's OnEnabled and OnDisabled hooks.
func (hostSide) StateHooks(p *Plugin) (enabled, disabled []func(ctx context.Context) error) {
	return slices.Clone(p.onEnabled), slices.Clone(p.onDisabled)
}

// MessageHooks returns p's OnUserMessage hooks.
func (hostSide) MessageHooks(p *Plugin) []func(ctx *Ctx, text string) Signal {
	return slices.Clone(p.onUserMessage)
}

// SystemMessageHooks returns p's OnSystemMessage hooks.
func (hostSide) SystemMessageHooks(p *Plugin) []func(ctx *Ctx, text string) Signal {
	return slices.Clone(p.onSystemMsg)
}

// TurnHooks returns p's OnPromptInject hooks and its OnCollectMethods
// filter (nil when it has none).
func (hostSide) TurnHooks(p *Plugin) (inject []func(ctx *Ctx) (string, error), collect func(ctx *Ctx) []string) {
	return slices.Clone(p.onPrompt), p.collect
}

// TimerHandler returns p's OnTimer handler, or nil.
func (hostSide) TimerHandler(p *Plugin) func(ctx context.Context, chatKey, id, payload string, late time.Duration) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.onTimer
}

// Commands returns p's chat commands, in mount order.
func (hostSide) Commands(p *Plugin) []*mountedCommand {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return slices.Clone(p.commands)
}

// RunCommand answers one use of the command c.
func (hostSide) RunCommand(c *mountedCommand, ctx *Ctx, call pluginbridge.CommandCall) (string, error) {
	return c.run(ctx, call)
}

// CommandHidden reports whether c is left out of /help.
func (hostSide) CommandHidden(c *mountedCommand) bool { return c.hidden }

// MountRawCommand mounts on p a command implemented outside Go; see
// mountRawCommand.
func (hostSide) MountRawCommand(p *Plugin, c Command, hidden bool,
	run func(ctx *Ctx, call pluginbridge.CommandCall) (string, error)) error {
	return mountRawCommand(p, c, hidden, run)
}

// Methods returns p's sandbox methods, in mount order.
func (hostSide) Methods(p *Plugin) []*mountedMethod { return slices.Clone(p.methods) }

// MethodParams returns m's parameters, in Python order.
func (hostSide) MethodParams(m *mountedMethod) []pluginbridge.Param {
	out := make([]pluginbridge.Param, len(m.params))
	for i, pa := range m.params {
		out[i] = pa.Param
	}
	return out
}

// MethodResult returns the Python type hint of m's result.
func (hostSide) MethodResult(m *mountedMethod) string { return m.resultPyType() }

// Call calls m with the run's ctx and the arguments as the sandbox sent
// them, and returns the result encoded; see mountedMethod.call.
func (hostSide) Call(m *mountedMethod, ctx *Ctx, args map[string]json.RawMessage) (json.RawMessage, error) {
	return m.call(ctx, args)
}

// MountRaw mounts on p a method implemented outside Go; see mountRaw.
func (hostSide) MountRaw(p *Plugin, m Method, params []pluginbridge.Param, result string,
	call func(ctx *Ctx, args map[string]json.RawMessage) (json.RawMessage, error)) error {
	ps := make([]param, len(params))
	for i, pa := range params {
		ps[i] = param{Param: pa}
	}
	return mountRaw(p, m, ps, result, call)
}

// ConfigSchema returns the schema of p's settings (MountConfig's, or
// those MountConfigFields declared), or nil when it declared none.
func (hostSide) ConfigSchema(p *Plugin) (*pluginconfig.Schema, error) {
	p.mu.RLock()
	d := p.config
	p.mu.RUnlock()
	switch {
	case d == nil:
		return nil, nil
	case d.defaults != nil:
		return pluginconfig.Reflect(d.defaults)
	case d.fields != nil:
		return pluginconfig.Fields(d.fields)
	}
	return nil, nil
}

// MountConfigFields declares the settings of a plugin implemented
// outside Go (a Python plugin's ConfigBase), as pluginconfig fields in
// JSON; Plugin.Config then returns them as a map.
func (hostSide) MountConfigFields(p *Plugin, fields json.RawMessage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.config = &configDecl{fields: fields, get: func() any {
		h := p.services()
		if h == nil {
			return nil
		}
		raw, _ := h.ConfigJSON()
		var v map[string]any
		json.Unmarshal(raw, &v)
		return v
	}}
}

// SetOptions folds opts into what they amount to.
func (hostSide) SetOptions(opts []SetOption) setOptions { return applySetOptions(opts) }

// Webhooks returns p's MountWebhook endpoints, in mount order.
func (hostSide) Webhooks(p *Plugin) []pluginbridge.WebhookData {
	p.web.mu.RLock()
	defer p.web.mu.RUnlock()
	return slices.Clone(p.web.webhooks)
}

// Routes returns MountRoutes' handler (nil when none) and its public
// paths.
func (hostSide) Routes(p *Plugin) (h http.Handler, public []string) {
	p.web.mu.RLock()
	defer p.web.mu.RUnlock()
	return p.web.routes, slices.Clone(p.web.public)
}
