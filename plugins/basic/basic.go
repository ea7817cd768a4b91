// Package basic is the built-in plugin every chat has: it lets the AI's
// code talk to the chat with send_msg_text and send_msg_file, called as the
// reference's scripts call them (send_msg_text(_ck, "...")).
//
// Unlike the reference, where any chat key is accepted, so one chat's code
// can write into another chat, a chat key other than the run's own is
// refused with an error that tells the code to pass _ck.
package basic

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/nekro-go/nekro/plugin"
)

func init() {
	// The Args blocks the AI reads come from the jsonschema tags of
	// TextArgs and FileArgs.
	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "send_msg_text", Description: "发送聊天消息文本",
		Doc: `Send a text message to the chat.

Attention: do not expose technical ids or keys in the message. Send only
content you are sure of; you cannot take a message back.

Example:
    send_msg_text(_ck, f"Hello, 1 + 1 = {1 + 1}")`,
	}, sendText)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "send_msg_file", Description: "发送聊天消息图片/文件资源",
		Doc: `Send an image or a file to the chat.

Images are shown as images, anything else as a file attachment. The file
must be under /app/shared or /app/uploads (write your files to
/app/shared); an http(s) URL is downloaded by the host first.

Example:
    with open("/app/shared/report.txt", "w") as f:
        f.write("done")
    send_msg_file(_ck, "/app/shared/report.txt")`,
	}, sendFile)

	plugin.Register(p)
}

var p = plugin.New(plugin.Meta{
	Name:        "Basic messaging",
	ModuleName:  "basic",
	Author:      "nekro",
	Version:     "1.0.0",
	Description: "Send text, images and files to the chat the code runs for.",
	URL:         "https://github.com/nekro-go/nekro/tree/main/plugins/basic",
})

// TextArgs are send_msg_text's parameters.
type TextArgs struct {
	ChatKey     string `json:"chat_key" jsonschema:"the chat's key; always pass _ck (other chats are refused)"`
	MessageText string `json:"message_text" jsonschema:"the message to send"`
}

// FileArgs are send_msg_file's parameters.
type FileArgs struct {
	ChatKey  string `json:"chat_key" jsonschema:"the chat's key; always pass _ck (other chats are refused)"`
	FilePath string `json:"file_path" jsonschema:"a path under /app/shared or /app/uploads, e.g. \"/app/shared/chart.png\", or an http(s) URL"`
}

// ownChat refuses a chat key other than the run's.
func ownChat(ctx *plugin.Ctx, key string) error {
	if key != ctx.ChatKey() {
		return fmt.Errorf("chat_key %q is not this chat: code may only send to its own chat, so pass _ck", key)
	}
	return nil
}

func sendText(ctx *plugin.Ctx, a TextArgs) (any, error) {
	if err := ownChat(ctx, a.ChatKey); err != nil {
		return nil, err
	}
	if strings.TrimSpace(a.MessageText) == "" {
		return nil, errors.New("the message is empty")
	}
	return nil, ctx.SendText(a.MessageText)
}

func sendFile(ctx *plugin.Ctx, a FileArgs) (any, error) {
	if err := ownChat(ctx, a.ChatKey); err != nil {
		return nil, err
	}
	path := a.FilePath
	if plugin.IsURL(path) {
		var err error
		if path, err = ctx.FS().MixedForwardFile(ctx, path, ""); err != nil {
			return nil, fmt.Errorf("download %s: %w", a.FilePath, err)
		}
	}
	image, err := isImage(ctx, path)
	if err != nil {
		return nil, err
	}
	if image {
		return nil, ctx.SendImage(path)
	}
	return nil, ctx.SendFile(path)
}

// isImage sniffs the file's first bytes.
func isImage(ctx *plugin.Ctx, path string) (bool, error) {
	f, err := ctx.FS().Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	head := make([]byte, 512)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	return strings.HasPrefix(http.DetectContentType(head[:n]), "image/"), nil
}
