package runtime

import (
	"context"
	"fmt"

	"github.com/nekro-go/nekro/internal/keys"
	"github.com/nekro-go/nekro/plugin"
)

// storeFor gives each run's methods their plugin's namespace; the run's
// chat and user reach the store through the scopes of plugin.Ctx.
func (rt *Runtime) storeFor(p *plugin.Plugin) plugin.Store { return rt.store.For(p.Key()) }

// ResetChat resets a chat's sandbox side: its warm sandboxes are
// discarded, then every enabled plugin's on-channel-reset hook runs with
// its key. One plugin's failure does not stop the others; all failures
// are returned.
func (rt *Runtime) ResetChat(ctx context.Context, chatKey string) error {
	if err := keys.Scope("chat", chatKey); err != nil {
		return fmt.Errorf("reset chat: %w", err)
	}
	rt.DiscardSpares(chatKey)
	return rt.registry.ChannelReset(ctx, chatKey)
}
