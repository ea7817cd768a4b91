package host

import (
	"context"
	"time"

	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/sandbox"
)

// Exec runs code in the chat's sandbox through the runtime, the plugins
// hosted: a request without Methods may call every enabled plugin's (a
// turn or the API gives the chat's view, ChatMethods), its calls reach a
// method only while its plugin stays enabled, and the system messages
// its plugins send the chat pass the plugins' OnSystemMessage hooks
// first. An error means the run could not happen; what the code did
// (even crashing) is in the result.
func (h *Host) Exec(ctx context.Context, req runtime.ExecRequest) (*runtime.ExecResult, error) {
	if req.Methods == nil {
		req.Methods = h.registry.Methods()
	}
	if req.Plugins == nil {
		req.Plugins = h.registry
	}
	if req.Chat != nil {
		req.Chat = screenedSender{ChatSender: req.Chat, h: h, chatKey: req.ChatKey}
	}
	return h.rt.Exec(ctx, req)
}

// Prewarm has the runtime start a sandbox for chatKey's next run
// (runtime.Prewarm) with the methods Exec would give it: methods, or
// every enabled plugin's when nil; since is when the work it serves
// began (ExecRequest.Since).
func (h *Host) Prewarm(chatKey string, limits sandbox.Limits, methods []*pluginhost.MethodInfo, since time.Time) {
	if methods == nil {
		methods = h.registry.Methods()
	}
	h.rt.Prewarm(chatKey, limits, methods, since)
}
