package host

import (
	"context"
	"fmt"

	"github.com/nekro-go/nekro/internal/keys"
)

// ResetChat resets a chat's sandbox side: its warm sandboxes are
// discarded (Runtime.DiscardSpares), then every enabled plugin's
// on-channel-reset hook runs with its key (the plugins' own reset, of
// their store for instance). One plugin's failure does not stop the others; all failures
// are returned.
func (h *Host) ResetChat(ctx context.Context, chatKey string) error {
	if err := keys.Scope("chat", chatKey); err != nil {
		return fmt.Errorf("reset chat: %w", err)
	}
	h.rt.DiscardSpares(chatKey)
	return h.registry.ChannelReset(ctx, chatKey)
}
