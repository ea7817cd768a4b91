package plugin

import "context"

// ChatSender sends messages into a run's chat. (Placeholder: the agent-loop
// issue defines the full interface.)
type ChatSender interface {
	SendText(ctx context.Context, text string) error
}
