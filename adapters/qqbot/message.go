package qqbot

import (
	"context"
	"fmt"
	"mime"
	"path"
	"strings"
	"time"

	"github.com/nekro-go/nekro/adapter"
)

// message is a GROUP_AT_MESSAGE_CREATE or C2C_MESSAGE_CREATE event's
// data, the parts the adapter reads.
type message struct {
	ID     string `json:"id"`
	Author struct {
		UserOpenID   string `json:"user_openid"`   // private messages
		MemberOpenID string `json:"member_openid"` // group messages
	} `json:"author"`
	Content     string       `json:"content"`
	Timestamp   string       `json:"timestamp"`
	GroupOpenID string       `json:"group_openid"`
	Attachments []attachment `json:"attachments"`
}

// attachment is a file a user sent.
type attachment struct {
	ContentType string `json:"content_type"` // "image/png", "file", "video/mp4", "voice", ...
	Filename    string `json:"filename"`
	Size        int64  `json:"size"`
	URL         string `json:"url"`
}

// event is a message event as read from the gateway.
type event struct {
	kind string // the dispatch's t
	m    message
	at   time.Time // when it arrived: the reply window runs from here
}

// reply is what the next passive reply in a chat answers: the latest
// user message, and how many replies it had.
type reply struct {
	msgID  string
	at     time.Time
	window time.Duration
	seq    int // msg_seq of the last reply sent
}

// handleEvents stores messages in the order the gateway sent them,
// across connections, until ctx ends.
func (a *Adapter) handleEvents(ctx context.Context, h adapter.Host, events <-chan event) {
	seen := recent{ids: map[string]bool{}}
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-events:
			if !seen.add(e.m.ID) {
				h.Log().Info("QQ bot: a message delivered twice was stored once", "id", e.m.ID)
				continue
			}
			m, ok := a.toMessage(e)
			if !ok {
				h.Log().Warn("QQ bot: a message event without its sender or group was ignored", "type", e.kind, "id", e.m.ID)
				continue
			}
			a.remember(m.ChatKey, e)
			if err := h.Receive(ctx, m); err != nil {
				h.Log().Warn("QQ bot message not stored", "chat", m.ChatKey, "err", err)
				continue
			}
			a.setStatus(func(s *adapter.Status) { s.Received++ })
		}
	}
}

// recent remembers the last message ids handled: the platform may
// deliver a message twice (its documentation warns of it), and a second
// copy must not start a second turn.
type recent struct {
	ids   map[string]bool
	order []string
}

const recentIDs = 1024

// add says whether id is new, and remembers it.
func (r *recent) add(id string) bool {
	if id == "" {
		return true
	}
	if r.ids[id] {
		return false
	}
	r.ids[id] = true
	r.order = append(r.order, id)
	if len(r.order) > recentIDs {
		delete(r.ids, r.order[0])
		r.order = r.order[1:]
	}
	return true
}

// remember makes e's message the one the chat's next replies answer.
func (a *Adapter) remember(chatKey string, e event) {
	if e.m.ID == "" {
		return
	}
	window := privateReplyWindow
	if e.kind == "GROUP_AT_MESSAGE_CREATE" {
		window = groupReplyWindow
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if r, ok := a.replies[chatKey]; ok && r.msgID == e.m.ID {
		return // the platform delivered it again: keep counting its replies
	}
	a.replies[chatKey] = &reply{msgID: e.m.ID, at: e.at, window: window}
}

// toMessage turns a message event into a chat message; ok is false for
// one without the ids it needs. Every such message is a trigger: the
// platform delivers a group message only when the bot is @-mentioned.
func (a *Adapter) toMessage(e event) (adapter.Message, bool) {
	var m adapter.Message
	switch e.kind {
	case "GROUP_AT_MESSAGE_CREATE":
		if e.m.GroupOpenID == "" || e.m.Author.MemberOpenID == "" {
			return m, false
		}
		m.ChatKey = adapter.ChatKey(Platform, "group_"+e.m.GroupOpenID)
		m.UserID = adapter.UserID(Platform, e.m.Author.MemberOpenID)
	default:
		if e.m.Author.UserOpenID == "" {
			return m, false
		}
		m.ChatKey = adapter.ChatKey(Platform, "private_"+e.m.Author.UserOpenID)
		m.UserID = adapter.UserID(Platform, e.m.Author.UserOpenID)
	}
	// QQ gives bots openids only, no names: a short form of the id
	// stands for one.
	m.UserName = "QQ user " + shortID(strings.TrimPrefix(m.UserID, Platform+":"))
	text := strings.TrimSpace(e.m.Content)
	for i, at := range e.m.Attachments {
		f := adapter.File{Name: attachmentName(at, i), Kind: "file", URL: absoluteURL(at.URL)}
		if strings.HasPrefix(at.ContentType, "image/") {
			f.Kind = "image"
		}
		if f.URL == "" {
			text += fmt.Sprintf(" [file %s QQ gave no URL for]", f.Name)
			continue
		}
		m.Files = append(m.Files, f)
	}
	m.Text = strings.TrimSpace(text)
	m.Trigger = true
	return m, true
}

// attachmentName is the attachment's file name, with an extension from
// its type when it has none.
func attachmentName(at attachment, i int) string {
	name := path.Base(strings.ReplaceAll(at.Filename, "\\", "/"))
	if name == "" || name == "." || name == "/" {
		name = fmt.Sprintf("attachment-%d", i+1)
	}
	if path.Ext(name) == "" {
		if ext, ok := commonExt[at.ContentType]; ok {
			name += ext
		} else if exts, _ := mime.ExtensionsByType(at.ContentType); len(exts) > 0 {
			name += exts[0]
		}
	}
	return name
}

var commonExt = map[string]string{"image/jpeg": ".jpg", "image/png": ".png", "image/gif": ".gif", "image/webp": ".webp", "video/mp4": ".mp4"}

// absoluteURL gives a scheme to the protocol-relative or bare URLs some
// attachments carry.
func absoluteURL(u string) string {
	switch {
	case u == "":
		return ""
	case strings.HasPrefix(u, "http://"), strings.HasPrefix(u, "https://"):
		return u
	case strings.HasPrefix(u, "//"):
		return "https:" + u
	default:
		return "https://" + u
	}
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
