// Package basic is the built-in plugin every chat has: it lets the AI's
// code talk to the chat with send_msg_text and send_msg_file, called as the
// reference's scripts call them (send_msg_text(_ck, "...")).
//
// Unlike the reference, where any chat key is accepted, so one chat's code
// can write into another chat, a chat key other than the run's own is
// refused with an error that tells the code to pass _ck.
//
// As the reference's, it guards against repeats (an identical recent
// message or file is skipped with a note to the AI, or refused in strict
// mode; a very similar text draws a note), offers view_str_content, an
// AGENT pager for long strings, and tells the AI what the chat supports.
// The recent messages it compares live in the KV store (chat scope), so
// the guard holds across restarts and replicas; a chat's reset clears
// them.
package basic

import (
	"context"
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

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Agent, Name: "view_str_content", Description: "查看字符串内容",
		Doc: `View a string's content, a page of lines at a time, to "see" data while you work
(a file you read, a table printed with pandas, a long result). The run ends
here and the page comes back to you.

Returns:
    str: the lines asked for, under a header with the total line count,
    whether the page was cut, and the call for the next page.

Example:
    import pandas as pd
    df = pd.read_csv("/app/uploads/data.csv")
    view_str_content(df.to_string())                                 # lines 1-100
    view_str_content(df.to_string(), start_line=101, end_line=200)   # the next page`,
	}, viewStrContent)

	p.OnCollectMethods(func(ctx *plugin.Ctx) []string {
		names := []string{"send_msg_text", "send_msg_file"}
		if settings.Get().EnableViewStrContent {
			names = append(names, "view_str_content")
		}
		return names
	})
	p.OnPromptInject(func(ctx *plugin.Ctx) (string, error) {
		return "Current Adapter Support Feature:\nReference_Message: False\n" +
			"Use `send_msg_file` for images/files instead of embedding file-like markup in `message_text`.", nil
	})
	p.OnChannelReset(func(ctx context.Context, chatKey string) error {
		st := p.Store()
		if _, err := st.Delete(ctx, plugin.Chat(chatKey), recentTextsKey); err != nil {
			return err
		}
		_, err := st.Delete(ctx, plugin.Chat(chatKey), recentFilesKey)
		return err
	})
	plugin.Register(p)
}

// Settings are the reference's BasicConfig, under its field names.
type Settings struct {
	SimilarityMessageFilter bool    `json:"SIMILARITY_MESSAGE_FILTER" title:"Filter repeated messages" description:"skip a message identical to a recent one, and note very similar ones to the AI"`
	StrictMessageFilter     bool    `json:"STRICT_MESSAGE_FILTER" title:"Strict repeat filter" description:"refuse an identical message with an error instead of skipping it"`
	SimilarityThreshold     float64 `json:"SIMILARITY_THRESHOLD" title:"Similarity warning threshold" description:"a text more similar than this to a recent one draws a note to the AI" min:"0" max:"1"`
	SimilarityCheckLength   int     `json:"SIMILARITY_CHECK_LENGTH" title:"Similarity check length" description:"texts shorter than this are not compared for similarity" min:"1"`
	EnableViewStrContent    bool    `json:"ENABLE_VIEW_STR_CONTENT" title:"Offer view_str_content" description:"let the AI page through long strings"`
}

var settings = plugin.MountConfig(p, Settings{SimilarityMessageFilter: true, SimilarityThreshold: 0.7,
	SimilarityCheckLength: 12, EnableViewStrContent: true})

var p = plugin.New(plugin.Meta{
	Name:        "Basic messaging",
	ModuleName:  "basic",
	Author:      "nekro",
	Version:     "1.0.0",
	Description: "Send text, images and files to the chat the code runs for.",
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
	return nil, guard(ctx, recentTextsKey, a.MessageText, 10, "message", func() error { return ctx.SendText(a.MessageText) })
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
	sum, err := fileSum(ctx, path)
	if err != nil {
		return nil, err
	}
	return nil, guard(ctx, recentFilesKey, sum, 3, "file", func() error {
		if image {
			return ctx.SendImage(path)
		}
		return ctx.SendFile(path)
	})
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
