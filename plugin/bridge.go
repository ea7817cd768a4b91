package plugin

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/nekro-go/nekro/internal/pluginbridge"
)

// The host's side (internal/pluginhost) reaches what only it uses through
// pluginbridge, so plugin authors see none of it.
func init() {
	pluginbridge.NewCtx = func(parent context.Context, p any, env any) any {
		return newCtx(parent, p.(*Plugin), env.(runEnv))
	}
	pluginbridge.Bind = func(p any, services any) { p.(*Plugin).bind(services.(hostServices)) }
	pluginbridge.Hooks = func(p any) (any, any, any) { return p.(*Plugin).hooks() }
	pluginbridge.Commands = func(p any) []pluginbridge.CommandData {
		pl := p.(*Plugin)
		pl.mu.RLock()
		defer pl.mu.RUnlock()
		var out []pluginbridge.CommandData
		for _, c := range pl.commands {
			out = append(out, pluginbridge.CommandData{Name: c.Name, Description: c.Description, Usage: c.Usage,
				Permission: c.Permission, Aliases: slices.Clone(c.Aliases),
				Run: func(ctx any, words []string) (string, error) { return c.run(ctx.(*Ctx), words) }})
		}
		return out
	}
	pluginbridge.MessageHooks = func(p any) any { return slices.Clone(p.(*Plugin).onUserMessage) }
	pluginbridge.SystemMessageHooks = func(p any) any { return slices.Clone(p.(*Plugin).onSystemMsg) }
	pluginbridge.TurnHooks = func(p any) (any, any) {
		pl := p.(*Plugin)
		return slices.Clone(pl.onPrompt), pl.collect
	}
	pluginbridge.StateHooks = func(p any) (any, any) {
		pl := p.(*Plugin)
		return slices.Clone(pl.onEnabled), slices.Clone(pl.onDisabled)
	}
	pluginbridge.Call = func(m any, ctx any, args map[string]json.RawMessage) (json.RawMessage, error) {
		return m.(*mountedMethod).call(ctx.(*Ctx), args)
	}
	pluginbridge.Methods = func(p any) []pluginbridge.MethodData {
		var out []pluginbridge.MethodData
		for _, m := range p.(*Plugin).mounted() {
			d := pluginbridge.MethodData{Method: m.Method, ResultPyType: m.resultPyType(), Entry: m}
			for _, pa := range m.params {
				d.Params = append(d.Params, pluginbridge.ParamData{Name: pa.Name, Doc: pa.Doc, PyType: pa.PyType,
					Optional: pa.Optional, DefaultPy: pa.DefaultPy})
			}
			out = append(out, d)
		}
		return out
	}
	pluginbridge.SetOptions = func(opts any) (time.Time, time.Duration, bool, bool) {
		o := applySetOptions(opts.([]SetOption))
		return o.expiresAt, o.ttl, o.hasTTL, o.expiry
	}
	pluginbridge.Registered = func() any { return registered() }
	pluginbridge.TimerHandler = func(p any) any { return p.(*Plugin).timerHandler() }
	pluginbridge.Services = func(p any) any {
		if h := p.(*Plugin).services(); h != nil {
			return h
		}
		return nil
	}
	pluginbridge.ConfigDecl = func(p any) (any, json.RawMessage) {
		pl := p.(*Plugin)
		pl.mu.RLock()
		defer pl.mu.RUnlock()
		if pl.config == nil {
			return nil, nil
		}
		return pl.config.defaults, pl.config.fields
	}
	pluginbridge.MountConfigFields = func(p any, fields json.RawMessage) {
		pl := p.(*Plugin)
		pl.mu.Lock()
		defer pl.mu.Unlock()
		pl.config = &configDecl{fields: fields, get: func() any {
			h := pl.services()
			if h == nil {
				return nil
			}
			raw, _ := h.ConfigJSON()
			var v map[string]any
			json.Unmarshal(raw, &v)
			return v
		}}
	}
	pluginbridge.MountRaw = func(p any, m any, params []pluginbridge.ParamData, result string,
		call func(ctx any, args map[string]json.RawMessage) (json.RawMessage, error)) error {
		ps := make([]param, len(params))
		for i, pa := range params {
			ps[i] = param{Name: pa.Name, Doc: pa.Doc, PyType: pa.PyType, Optional: pa.Optional, DefaultPy: pa.DefaultPy}
		}
		return mountRaw(p.(*Plugin), m.(Method), ps, result, func(ctx *Ctx, args map[string]json.RawMessage) (json.RawMessage, error) {
			return call(ctx, args)
		})
	}
}
