package onebot

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/nekro-go/nekro/adapter"
)

// event is the part of a OneBot v11 event the adapter reads.
type event struct {
	PostType    string          `json:"-"`
	MessageType string          `json:"message_type"`
	SubType     string          `json:"sub_type"`
	MessageID   id              `json:"message_id"`
	UserID      id              `json:"user_id"`
	GroupID     id              `json:"group_id"`
	SelfID      id              `json:"self_id"`
	Message     json.RawMessage `json:"message"`
	Sender      struct {
		Nickname string `json:"nickname"`
		Card     string `json:"card"`
		Role     string `json:"role"`
	} `json:"sender"`
	MetaEventType string `json:"meta_event_type"`
	Interval      int64  `json:"interval"`
}

// handleEvents stores the connection's message events in order.
func (c *conn) handleEvents(ctx context.Context, events <-chan event) {
	for e := range events {
		if e.PostType != "message" || (e.MessageType != "group" && e.MessageType != "private") {
			continue // notices, requests, the bot's own sent messages (message_sent)
		}
		m, ok := c.toMessage(ctx, e)
		if !ok {
			continue
		}
		if err := c.h.Receive(ctx, m); err != nil {
			c.h.Log().Warn("OneBot message not stored", "chat", m.ChatKey, "err", err)
			continue
		}
		c.a.setStatus(c.key, func(s *adapter.Status) { s.Received++ })
	}
}

// toMessage turns a message event into a chat message; ok is false for
// one the bot does not read (its own, or of a group not allowed).
func (c *conn) toMessage(ctx context.Context, e event) (adapter.Message, bool) {
	self := c.self()
	private := e.MessageType == "private"
	group := string(e.GroupID)
	re := adapter.Event{Private: private, Group: group, FromSelf: self != "" && string(e.UserID) == self, BotNames: c.botNames()}
	if !c.a.rule.Allowed(re) {
		return adapter.Message{}, false
	}
	channel := "group_" + group
	if private {
		channel = "private_" + string(e.UserID)
	}
	m := adapter.Message{ChatKey: adapter.ChatKey(Platform, channel), UserID: adapter.UserID(Platform, string(e.UserID)),
		UserName: e.Sender.Card, Admin: e.Sender.Role == "owner" || e.Sender.Role == "admin"}
	if m.UserName == "" {
		m.UserName = e.Sender.Nickname
	}
	var text strings.Builder
	for _, s := range parseMessage(e.Message) {
		switch s.Type {
		case "text":
			text.WriteString(s.Data["text"])
		case "at":
			qq := s.Data["qq"]
			switch {
			case qq == "all":
				text.WriteString("@all")
			case qq == self:
				re.Mention = true
				name := "bot"
				if n := c.botNames(); len(n) > 0 {
					name = n[0]
				} else if len(c.a.cfg.BotNames) > 0 {
					name = c.a.cfg.BotNames[0]
				}
				text.WriteString("@" + name)
			default:
				name := s.Data["name"]
				if name == "" && !private {
					name = c.memberName(ctx, group, qq)
				}
				if name == "" {
					name = qq
				}
				text.WriteString("@" + name)
			}
		case "reply":
			fmt.Fprintf(&text, "[reply to message %s] ", s.Data["id"])
		case "face":
			text.WriteString("[face]")
		case "image", "file", "video", "record":
			if f, ok := fileOf(s); ok {
				m.Files = append(m.Files, f)
			} else {
				fmt.Fprintf(&text, "[%s the platform gave no URL for]", s.Type)
			}
		default:
			fmt.Fprintf(&text, "[%s]", s.Type)
		}
	}
	m.Text = strings.TrimSpace(text.String())
	re.Text = m.Text
	m.Trigger = c.a.rule.Answer(re)
	c.a.mu.Lock()
	c.a.route[m.ChatKey] = self
	c.a.mu.Unlock()
	return m, true
}

// fileOf reads where a media segment's content is: base64:// inline, or
// an http(s) URL (url, else file when it is one). Local paths of the
// implementation's machine (file://) are not read.
func fileOf(s segment) (adapter.File, bool) {
	kind := "file"
	if s.Type == "image" {
		kind = "image"
	}
	name := s.Data["name"]
	if name == "" {
		name = s.Data["file"]
	}
	f := adapter.File{Kind: kind, Name: path.Base(strings.SplitN(name, "?", 2)[0])}
	if f.Name == "" || f.Name == "." || f.Name == "/" || strings.Contains(name, "://") {
		f.Name = s.Type
	}
	for _, src := range []string{s.Data["url"], s.Data["file"]} {
		switch {
		case strings.HasPrefix(src, "base64://"):
			b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(src, "base64://"))
			if err == nil {
				f.Data = b
				return f, true
			}
		case strings.HasPrefix(src, "http://"), strings.HasPrefix(src, "https://"):
			f.URL = src
			return f, true
		}
	}
	return f, false
}

type cachedName struct {
	name    string
	expires time.Time
}

// memberName is a group member's card or nickname (get_group_member_info),
// cached for ten minutes; "" when the implementation does not answer in
// time (remembered for a minute, so a silent implementation costs one
// timeout a minute, not one per mention).
func (c *conn) memberName(ctx context.Context, group, user string) string {
	key := group + "/" + user
	c.a.mu.Lock()
	cn, ok := c.a.names[key]
	c.a.mu.Unlock()
	if ok && time.Now().Before(cn.expires) {
		return cn.name
	}
	data, err := c.call(ctx, "get_group_member_info", map[string]any{"group_id": number(group), "user_id": number(user), "no_cache": false})
	var info struct {
		Nickname string `json:"nickname"`
		Card     string `json:"card"`
	}
	ttl := 10 * time.Minute
	if err != nil || json.Unmarshal(data, &info) != nil {
		c.h.Log().Info("OneBot: a member's name is unknown; the mention shows the id", "group", group, "user", user, "err", err)
		ttl = time.Minute
	}
	name := info.Card
	if name == "" {
		name = info.Nickname
	}
	c.a.mu.Lock()
	c.a.names[key] = cachedName{name: name, expires: time.Now().Add(ttl)}
	c.a.mu.Unlock()
	return name
}
