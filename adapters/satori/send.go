package satori

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"strings"

	"github.com/nekro-go/nekro/adapter"
)

// Send delivers m to its channel with one message.create: the text
// escaped, then each file as a resource element (img for images, file
// for the rest) whose src is a base64 data: URL, which the protocol's
// resource elements accept and the server's adapter uploads to the
// platform its own way.
func (a *Adapter) Send(ctx context.Context, m adapter.Outgoing) error {
	platform, _, channel, ok := splitChatKey(m.ChatKey)
	if !ok {
		return fmt.Errorf("chat %s: want satori-<platform>-group_<channel id> or satori-<platform>-private_<channel id>", m.ChatKey)
	}
	content, err := render(m)
	if err != nil {
		return fmt.Errorf("chat %s: %w", m.ChatKey, err)
	}
	if content == "" {
		return nil // nothing to say
	}
	l, err := a.loginFor(m.ChatKey, platform)
	if err != nil {
		return fmt.Errorf("chat %s: %w", m.ChatKey, err)
	}
	var created []struct {
		ID string `json:"id"`
	}
	body := struct {
		ChannelID string `json:"channel_id"`
		Content   string `json:"content"`
	}{channel, content}
	if err := a.api.call(ctx, l.platform, l.selfID, "message.create", body, &created); err != nil {
		return fmt.Errorf("chat %s: %w", m.ChatKey, err)
	}
	a.mu.Lock()
	l.sent++
	for _, c := range created {
		if c.ID != "" {
			l.sentIDs = append(l.sentIDs, c.ID)
		}
	}
	if over := len(l.sentIDs) - rememberSent; over > 0 {
		l.sentIDs = append(l.sentIDs[:0], l.sentIDs[over:]...)
	}
	a.mu.Unlock()
	return nil
}

// loginFor picks the login that sends to a chat: the one that last read
// it, else the platform's first online login.
func (a *Adapter) loginFor(key, platform string) (*login, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if id, ok := a.chatLogin[key]; ok {
		if l := a.logins[loginKey(platform, id)]; l != nil {
			return l, nil
		}
	}
	var pick *login
	for _, l := range a.logins {
		if l.platform != platform {
			continue
		}
		if pick == nil || l.online && !pick.online || l.online == pick.online && l.selfID < pick.selfID {
			pick = l
		}
	}
	if pick == nil {
		return nil, fmt.Errorf("the Satori server has no login on the platform %q (not connected yet, or the bot account is gone)", platform)
	}
	return pick, nil
}

// render writes m as Satori content: nothing the model wrote can become
// an element.
func render(m adapter.Outgoing) (string, error) {
	var b strings.Builder
	b.WriteString(escape(strings.TrimSpace(m.Text)))
	for _, f := range m.Files {
		rc, err := f.Open()
		if err != nil {
			return "", fmt.Errorf("file %s: %w", f.Name, err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return "", fmt.Errorf("file %s: %w", f.Name, err)
		}
		src := "data:" + dataMediaType(f.MIME) + ";base64," + base64.StdEncoding.EncodeToString(data)
		name := "file"
		if f.Kind == "image" {
			name = "img"
		}
		b.WriteString(selfClosing(name, "src", src, "title", f.Name))
	}
	return b.String(), nil
}

// dataMediaType writes a MIME type as a data: URL's media type (RFC
// 2397), which has no spaces: "text/plain;charset=utf-8".
func dataMediaType(m string) string {
	mt, params, err := mime.ParseMediaType(m)
	if err != nil || mt == "" {
		return "application/octet-stream"
	}
	if cs := params["charset"]; cs != "" && !strings.ContainsAny(cs, ";,\" \t") {
		mt += ";charset=" + cs
	}
	return mt
}
