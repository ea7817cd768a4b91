// Package chatmessage ports the BEHAVIOR example of the plugin document
// "沙盒方法详解" (seed 004): send_chat_message sends a text to the current
// chat and returns a description of what it did. As a BEHAVIOR method, its
// result is recorded in the chat as a system message and does not start a
// new round of the model.
package chatmessage

import (
	"fmt"

	"github.com/nekro-go/nekro/plugin"
)

func init() {
	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Behavior, Name: "send_chat_message", Description: "向当前会话发送一条消息。",
		Doc: `向当前会话发送一条消息。

The result is recorded in the chat history as a system message; it does
not start a new round.

Args:
    text_to_send (str): the text to send.

Returns:
    str: whether the message was sent.

Example:
    send_chat_message("任务已完成")`,
	}, sendChatMessage)
	plugin.Register(p)
}

var p = plugin.New(plugin.Meta{
	Name:        "Chat message example",
	ModuleName:  "chat_message",
	Author:      "nekro_examples",
	Version:     "1.0.0",
	Description: "The BEHAVIOR example of the sandbox-method document.",
})

// Args are send_chat_message's parameters.
type Args struct {
	TextToSend string `json:"text_to_send" jsonschema:"the text to send"`
}

// sendChatMessage reports failure in its result, as the seed's version
// does, so the AI reads it in the history instead of crashing.
func sendChatMessage(ctx *plugin.Ctx, a Args) (string, error) {
	if err := ctx.SendText(a.TextToSend); err != nil {
		return fmt.Sprintf("发送消息失败: %v", err), nil
	}
	preview := []rune(a.TextToSend)
	if len(preview) > 30 {
		preview = preview[:30]
	}
	return fmt.Sprintf("消息 '%s...' 已成功发送。", string(preview)), nil
}
