package discord

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/nekro-go/nekro/adapter"
)

// user is a Discord user object, the parts the adapter reads.
type user struct {
	ID         string `json:"id"`
	Username   string `json:"username"`
	GlobalName string `json:"global_name"` // the display name; null for some
	Bot        bool   `json:"bot"`
}

func (u user) name() string {
	if u.GlobalName != "" {
		return u.GlobalName
	}
	if u.Username != "" {
		return u.Username
	}
	return u.ID
}

// member is a guild member, partial as MESSAGE_CREATE carries it.
type member struct {
	Nick string `json:"nick"`
}

// attachment is a file attached to a message.
type attachment struct {
	ID          string `json:"id"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
	Size        int64  `json:"size"`
	URL         string `json:"url"`
	ProxyURL    string `json:"proxy_url"`
}

// messageCreate is a MESSAGE_CREATE event's message object.
type messageCreate struct {
	ID        string  `json:"id"`
	Type      int     `json:"type"`
	ChannelID string  `json:"channel_id"`
	GuildID   string  `json:"guild_id"` // absent in DMs
	Author    user    `json:"author"`
	Member    *member `json:"member"`
	WebhookID string  `json:"webhook_id"`
	Content   string  `json:"content"`
	Mentions  []struct {
		user
		Member *member `json:"member"`
	} `json:"mentions"`
	Attachments       []attachment `json:"attachments"`
	ReferencedMessage *struct {
		ID      string `json:"id"`
		Author  user   `json:"author"`
		Content string `json:"content"`
	} `json:"referenced_message"`
	MessageReference *struct {
		MessageID string `json:"message_id"`
	} `json:"message_reference"`
}

// Message types that are users' messages (DEFAULT, REPLY); the others
// are notices (joins, pins, boosts).
const (
	typeDefault = 0
	typeReply   = 19
)

// handleEvents stores messages in the order the gateway sent them,
// across connections, until ctx ends.
func (a *Adapter) handleEvents(ctx context.Context, h adapter.Host, events <-chan messageCreate) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-events:
			m, ok := a.toMessage(e)
			if !ok {
				continue
			}
			if err := h.Receive(ctx, m); err != nil {
				h.Log().Warn("Discord message not stored", "chat", m.ChatKey, "err", err)
				continue
			}
			a.setStatus(func(s *adapter.Status) { s.Received++ })
		}
	}
}

var (
	userMentionRE = regexp.MustCompile(`<@!?(\d+)>`)
	markupRE      = regexp.MustCompile(`<@&\d+>|<#\d+>|<a?:(\w+):\d+>`)
)

// toMessage turns a MESSAGE_CREATE into a chat message; ok is false for
// one the bot does not read (its own, a notice, or of a channel not
// allowed).
func (a *Adapter) toMessage(e messageCreate) (adapter.Message, bool) {
	if e.Type != typeDefault && e.Type != typeReply {
		return adapter.Message{}, false
	}
	a.mu.Lock()
	self := a.self
	a.mu.Unlock()
	private := e.GuildID == ""
	if !private && !a.cfg.allowed(e.GuildID, e.ChannelID) {
		return adapter.Message{}, false
	}
	re := adapter.Event{Private: private, Group: e.ChannelID, FromSelf: self.id != "" && e.Author.ID == self.id, BotNames: self.names}
	if !a.rule.Allowed(re) {
		return adapter.Message{}, false
	}
	channel := "group_" + e.ChannelID
	if private {
		channel = "private_" + e.ChannelID
	}
	m := adapter.Message{ChatKey: adapter.ChatKey(Platform, channel), UserID: adapter.UserID(Platform, e.Author.ID), UserName: e.Author.name()}
	if e.Member != nil && e.Member.Nick != "" {
		m.UserName = e.Member.Nick
	}

	names := map[string]string{}
	for _, u := range e.Mentions {
		names[u.ID] = u.name()
		if u.Member != nil && u.Member.Nick != "" {
			names[u.ID] = u.Member.Nick
		}
		if self.id != "" && u.ID == self.id {
			re.Mention = true
		}
	}
	botName := "bot"
	if len(a.cfg.BotNames) > 0 {
		botName = a.cfg.BotNames[0]
	} else if len(self.names) > 0 {
		botName = self.names[0]
	}
	text := userMentionRE.ReplaceAllStringFunc(e.Content, func(s string) string {
		id := userMentionRE.FindStringSubmatch(s)[1]
		if self.id != "" && id == self.id {
			re.Mention = true
			return "@" + botName
		}
		if n, ok := names[id]; ok {
			return "@" + n
		}
		return "@" + id
	})
	text = markupRE.ReplaceAllStringFunc(text, func(s string) string {
		switch {
		case strings.HasPrefix(s, "<@&"):
			return "@role"
		case strings.HasPrefix(s, "<#"):
			return "#channel"
		default: // a custom emoji <:name:id>
			return ":" + markupRE.FindStringSubmatch(s)[1] + ":"
		}
	})
	switch r := e.ReferencedMessage; {
	case r != nil:
		if self.id != "" && r.Author.ID == self.id {
			re.Mention = true
		}
		quote := []rune(strings.Join(strings.Fields(r.Content), " "))
		if len(quote) > 80 {
			quote = append(quote[:80], '…')
		}
		text = fmt.Sprintf("[reply to %s: %s] %s", r.Author.name(), string(quote), text)
	case e.MessageReference != nil && e.MessageReference.MessageID != "":
		text = fmt.Sprintf("[reply to message %s] %s", e.MessageReference.MessageID, text)
	}

	for _, at := range e.Attachments {
		f := adapter.File{Name: path.Base(at.Filename), Kind: "file", URL: at.URL}
		if f.URL == "" {
			f.URL = at.ProxyURL
		}
		if f.Name == "" || f.Name == "." || f.Name == "/" {
			f.Name = "attachment-" + at.ID
		}
		if strings.HasPrefix(at.ContentType, "image/") {
			f.Kind = "image"
		}
		if f.URL == "" {
			text += fmt.Sprintf(" [file %s Discord gave no URL for]", f.Name)
			continue
		}
		m.Files = append(m.Files, f)
	}
	m.Text = strings.TrimSpace(text)
	re.Text = m.Text
	// Other bots and webhooks are context, never asked: two bots must not
	// answer each other forever.
	m.Trigger = a.rule.Answer(re) && !e.Author.Bot && e.WebhookID == ""
	return m, true
}
