package agent

// The long-term memory's two touch points: its block in a turn's prompt,
// and the end of a turn, after which it may learn from the chat.

import (
	"context"

	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/llm"
)

// Memory is the long-term memory of chats (internal/memory).
type Memory interface {
	// Recall returns the block of memories a turn of chatKey answering
	// these messages should see, "" when none. It is bounded in size and
	// time, and fails to "".
	Recall(ctx context.Context, chatKey string, answering []chat.Message) string
	// TurnEnded tells the memory a turn of chatKey ended; it must not
	// block (the memory learns in the background).
	TurnEnded(chatKey string)
	// ForgetChat erases the memories of a chat being reset.
	ForgetChat(ctx context.Context, chatKey string) error
}

// memoryBlock is the memory's block for a turn of chatKey answering
// these messages, "" with no memory or nothing recalled.
func (a *Agent) memoryBlock(ctx context.Context, chatKey string, answering []chat.Message) string {
	if a.cfg.Memory == nil {
		return ""
	}
	return a.cfg.Memory.Recall(ctx, chatKey, answering)
}

// withBlock puts the memory's block at the end of the turn's first user
// message (after the history, so the history's bytes stay where a prompt
// cache has them). Without a block, msgs are returned unchanged.
func withBlock(msgs []llm.ChatMessage, block string) []llm.ChatMessage {
	if block == "" {
		return msgs
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" && msgs[i].Content.Parts == nil {
			msgs[i].Content.Text += block
			break
		}
	}
	return msgs
}

// turnEnded tells the memory, if any, that a turn of chatKey ended.
func (a *Agent) turnEnded(chatKey string) {
	if a.cfg.Memory != nil {
		a.cfg.Memory.TurnEnded(chatKey)
	}
}

// forgetChat erases a reset chat's memories, if any.
func (a *Agent) forgetChat(ctx context.Context, chatKey string) error {
	if a.cfg.Memory == nil {
		return nil
	}
	return a.cfg.Memory.ForgetChat(ctx, chatKey)
}
