package onebot

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"strings"

	"github.com/nekro-go/nekro/adapter"
)

// Send delivers m: its text and images as one message (send_group_msg or
// send_private_msg, images as base64:// image segments), then each other
// file with upload_group_file or upload_private_file (base64:// too).
// It goes through the connection that last brought a message of the chat,
// else any connected one.
func (a *Adapter) Send(ctx context.Context, m adapter.Outgoing) error {
	platform, channel, ok := adapter.SplitChatKey(m.ChatKey)
	if !ok || platform != Platform {
		return fmt.Errorf("chat %s is not a OneBot v11 chat", m.ChatKey)
	}
	kind, target, ok := strings.Cut(channel, "_")
	if !ok || (kind != "group" && kind != "private") || target == "" {
		return fmt.Errorf("chat %s: want onebot_v11-group_<id> or onebot_v11-private_<id>", m.ChatKey)
	}
	c := a.connFor(m.ChatKey)
	if c == nil {
		return fmt.Errorf("chat %s: %w", m.ChatKey, errNoConnection)
	}
	var segs []map[string]any
	if strings.TrimSpace(m.Text) != "" {
		segs = append(segs, map[string]any{"type": "text", "data": map[string]any{"text": m.Text}})
	}
	var uploads []adapter.OutFile
	for _, f := range m.Files {
		if f.Kind != "image" {
			uploads = append(uploads, f)
			continue
		}
		b64, err := readBase64(f)
		if err != nil {
			return err
		}
		segs = append(segs, map[string]any{"type": "image", "data": map[string]any{"file": b64}})
	}
	if len(segs) > 0 {
		params := map[string]any{"message": segs}
		action := "send_group_msg"
		if kind == "group" {
			params["group_id"] = number(target)
		} else {
			action = "send_private_msg"
			params["user_id"] = number(target)
		}
		if _, err := c.call(ctx, action, params); err != nil {
			return err
		}
	}
	for _, f := range uploads {
		b64, err := readBase64(f)
		if err != nil {
			return err
		}
		params := map[string]any{"file": b64, "name": f.Name}
		action := "upload_group_file"
		if kind == "group" {
			params["group_id"] = number(target)
		} else {
			action = "upload_private_file"
			params["user_id"] = number(target)
		}
		if _, err := c.call(ctx, action, params); err != nil {
			return err
		}
	}
	a.setStatus(c.key, func(s *adapter.Status) { s.Sent++ })
	return nil
}

func (a *Adapter) connFor(chatKey string) *conn {
	a.mu.Lock()
	defer a.mu.Unlock()
	want, known := a.route[chatKey]
	var any *conn
	for c := range a.conns {
		if known && c.self() == want {
			return c
		}
		if any == nil {
			any = c
		}
	}
	return any
}

func readBase64(f adapter.OutFile) (string, error) {
	r, err := f.Open()
	if err != nil {
		return "", fmt.Errorf("file %s: %w", f.Name, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return "", fmt.Errorf("file %s: %w", f.Name, err)
	}
	return "base64://" + base64.StdEncoding.EncodeToString(b), nil
}
