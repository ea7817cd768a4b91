package host

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/registry"
	"github.com/nekro-go/nekro/plugin"
)

// Bounds of the plugins' per-turn hooks (OnPromptInject, OnCollectMethods).
const (
	// MaxInjectBytes caps one plugin's injected prompt text.
	MaxInjectBytes = 4 << 10
	// TurnHookTimeout bounds each plugin's hooks for one turn.
	TurnHookTimeout = 2 * time.Second
)

// ChatView is what a turn in one chat sees of the plugins: the methods its
// code may call (after each plugin's method filter), their docs for the
// system prompt, and the plugins' injected context for the history
// header.
type ChatView struct {
	Methods    []*pluginhost.MethodInfo
	MethodDocs string
	// Context holds one <plugin_runtime_context> block per plugin that
	// injected text, in plugin order; "" when none did.
	Context string
	// Packages is the prompt's sentence on the Python packages the
	// sandbox has (Runtime.PackagesSentence).
	Packages string
}

// ChatView asks the enabled plugins' per-turn hooks about chatKey (as
// userID, which may be empty), concurrently, each bounded by
// TurnHookTimeout: a plugin whose filter fails or is late shows all its
// methods; one whose injection fails or is late is left out of Context.
func (h *Host) ChatView(ctx context.Context, chatKey, userID string) ChatView {
	return h.chatView(ctx, chatKey, userID, true)
}

// ChatMethods is ChatView's Methods alone: only the method filters run,
// no prompt injection, and no docs are rendered (what a run outside a
// turn, such as the API's exec, may call).
func (h *Host) ChatMethods(ctx context.Context, chatKey, userID string) []*pluginhost.MethodInfo {
	return h.chatView(ctx, chatKey, userID, false).Methods
}

func (h *Host) chatView(ctx context.Context, chatKey, userID string, full bool) ChatView {
	plugins := h.registry.Plugins()
	type answer struct {
		methods []*pluginhost.MethodInfo
		inject  string
	}
	answers := make([]answer, len(plugins))
	var wg sync.WaitGroup
	for i, p := range plugins {
		answers[i].methods = pluginhost.Methods(p)
		inject, collect := pluginhost.TurnHooks(p)
		if !full {
			inject = nil
		}
		if len(inject) == 0 && collect == nil {
			continue
		}
		wg.Go(func() {
			answers[i] = h.askPlugin(ctx, p, chatKey, userID, inject, collect)
		})
	}
	wg.Wait()
	var v ChatView
	var b strings.Builder
	for i, p := range plugins {
		v.Methods = append(v.Methods, answers[i].methods...)
		if !full {
			continue
		}
		if text := answers[i].inject; text != "" {
			fmt.Fprintf(&b, "<plugin_runtime_context name=%q module_name=%q>\n%s\n</plugin_runtime_context>\n",
				p.Meta().Name, p.Meta().ModuleName, text)
		}
	}
	if !full {
		return v
	}
	v.MethodDocs, v.Context = registry.RenderMethods(v.Methods), b.String()
	v.Packages = h.rt.PackagesSentence(ctx)
	return v
}

// PluginCtx returns a Ctx for p outside any run (hooks, commands): the
// chat and user are those given, the store works, FS and sending do not.
func (h *Host) PluginCtx(ctx context.Context, p *plugin.Plugin, chatKey, userID string) *plugin.Ctx {
	env := &pluginhost.RunEnv{RunInfo: plugin.RunInfo{ChatKey: chatKey, UserID: userID, ContainerKey: files.ContainerKey(chatKey)},
		StoreFor: h.storeFor, Knowledge: h.rt.KnowledgeFor(chatKey)}
	return pluginhost.NewCtx(ctx, p, env)
}

// askPlugin runs one plugin's per-turn hooks.
func (h *Host) askPlugin(ctx context.Context, p *plugin.Plugin, chatKey, userID string,
	inject []func(*plugin.Ctx) (string, error), collect func(*plugin.Ctx) []string) (a struct {
	methods []*pluginhost.MethodInfo
	inject  string
}) {
	all := pluginhost.Methods(p)
	a.methods = all
	log := h.log.With("plugin", p.Key(), "chat", chatKey)
	hctx, cancel := context.WithTimeout(ctx, TurnHookTimeout)
	defer cancel()
	env := &pluginhost.RunEnv{RunInfo: plugin.RunInfo{ChatKey: chatKey, UserID: userID, ContainerKey: files.ContainerKey(chatKey)},
		StoreFor: h.storeFor, Knowledge: h.rt.KnowledgeFor(chatKey)}
	pctx := pluginhost.NewCtx(hctx, p, env)
	if collect != nil {
		names, err := bounded(hctx, func() ([]string, error) { return collect(pctx), nil })
		if err != nil {
			log.Warn("method filter left out of this turn: all the plugin's methods are shown", "err", err)
		} else {
			a.methods = nil
			for _, m := range all {
				if slices.Contains(names, m.Name) {
					a.methods = append(a.methods, m)
				}
			}
		}
	}
	var parts []string
	for _, f := range inject {
		text, err := bounded(hctx, func() (string, error) { return f(pctx) })
		if err != nil {
			log.Warn("prompt injection left out of this turn", "err", err)
			continue
		}
		if text = strings.TrimSpace(text); text != "" {
			parts = append(parts, text)
		}
	}
	// The text can neither close its block early nor open another one
	// that passes for nekro's own (its lines are the plugin's; each plugin
	// escapes the untrusted pieces within them with plugin.EscapePrompt).
	text := plugin.EscapePromptTags(strings.Join(parts, "\n"))
	a.inject = capText(text, MaxInjectBytes)
	return a
}

// bounded runs f, turning a panic into an error and giving up when ctx
// ends (f keeps running, but its answer is dropped).
func bounded[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- result{err: fmt.Errorf("panic: %v", v)}
			}
		}()
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("no answer within %s", TurnHookTimeout)
	}
}

// capText cuts s to at most n bytes at a rune boundary, saying so.
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const more = "\n[... cut: the plugin's text was longer]"
	cut := n - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}

// UserMessageSignal asks the enabled plugins' OnUserMessage hooks about a
// user's message, concurrently, each bounded by TurnHookTimeout (a late or
// panicking hook counts as plugin.Continue), and combines their verdicts
// as the reference does: any BlockAll wins, then any ForceTrigger, then
// the largest.
func (h *Host) UserMessageSignal(ctx context.Context, chatKey, userID, text string) plugin.Signal {
	return h.messageSignal(ctx, chatKey, userID, text, pluginhost.MessageHooks)
}

// SystemMessageSignal is UserMessageSignal for a system message pushed
// into chatKey (the plugins' OnSystemMessage hooks).
func (h *Host) SystemMessageSignal(ctx context.Context, chatKey, text string) plugin.Signal {
	return h.messageSignal(ctx, chatKey, "", text, pluginhost.SystemMessageHooks)
}

func (h *Host) messageSignal(ctx context.Context, chatKey, userID, text string,
	hooksOf func(*plugin.Plugin) []func(*plugin.Ctx, string) plugin.Signal) plugin.Signal {
	plugins := h.registry.Plugins()
	signals := make([][]plugin.Signal, len(plugins))
	var wg sync.WaitGroup
	for i, p := range plugins {
		hooks := hooksOf(p)
		if len(hooks) == 0 {
			continue
		}
		wg.Go(func() {
			hctx, cancel := context.WithTimeout(ctx, TurnHookTimeout)
			defer cancel()
			pctx := h.PluginCtx(hctx, p, chatKey, userID)
			for _, f := range hooks {
				s, err := bounded(hctx, func() (plugin.Signal, error) { return f(pctx, text), nil })
				if err != nil {
					h.log.Warn("message hook left out", "plugin", p.Key(), "chat", chatKey, "err", err)
					continue
				}
				signals[i] = append(signals[i], s)
			}
		})
	}
	wg.Wait()
	return CombineSignals(slices.Concat(signals...))
}

// screenedSender passes a run's system messages through the plugins'
// OnSystemMessage hooks: one they drop (BlockAll) is not stored.
type screenedSender struct {
	pluginhost.ChatSender
	h       *Host
	chatKey string
}

func (s screenedSender) AddSystem(ctx context.Context, text string, wake bool) error {
	switch s.h.SystemMessageSignal(ctx, s.chatKey, text) {
	case plugin.BlockAll:
		s.h.log.Debug("a plugin's hook dropped a system message", "chat", s.chatKey)
		return nil
	case plugin.BlockTrigger:
		wake = false
	case plugin.ForceTrigger:
		wake = true
	}
	return s.ChatSender.AddSystem(ctx, text, wake)
}

// CombineSignals folds message hooks' verdicts: any BlockAll wins, then
// any ForceTrigger, then the largest; none is Continue.
func CombineSignals(ss []plugin.Signal) plugin.Signal {
	out := plugin.Continue
	force := false
	for _, s := range ss {
		switch {
		case s == plugin.BlockAll:
			return plugin.BlockAll
		case s == plugin.ForceTrigger:
			force = true
		case s > out && s <= plugin.BlockAll:
			out = s
		}
	}
	if force {
		return plugin.ForceTrigger
	}
	return out
}
