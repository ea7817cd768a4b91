package satori

import (
	"context"
	"encoding/base64"
	"fmt"
	"mime"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/nekro-go/nekro/adapter"
)

// handleEvents stores messages in the order the server sent them, across
// connections, until ctx ends.
func (a *Adapter) handleEvents(ctx context.Context, h adapter.Host, events <-chan event) {
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
				h.Log().Warn("Satori message not stored", "chat", m.ChatKey, "err", err)
				continue
			}
			a.mu.Lock()
			if l := a.logins[loginKey(e.platform(), e.selfID())]; l != nil {
				l.received++
			}
			a.mu.Unlock()
		}
	}
}

// chatKey is the chat key of a channel of a Satori platform.
func chatKey(platform string, private bool, channel string) string {
	kind := "group_"
	if private {
		kind = "private_"
	}
	return adapter.ChatKey(Platform, platform+"-"+kind+channel)
}

// splitChatKey is chatKey's inverse.
func splitChatKey(key string) (platform string, private bool, channel string, ok bool) {
	p, rest, ok := adapter.SplitChatKey(key)
	if !ok || p != Platform {
		return "", false, "", false
	}
	g, pr := strings.Index(rest, "-group_"), strings.Index(rest, "-private_")
	switch {
	case g > 0 && (pr < 0 || g < pr):
		platform, channel = rest[:g], rest[g+len("-group_"):]
	case pr > 0:
		platform, channel, private = rest[:pr], rest[pr+len("-private_"):], true
	default:
		return "", false, "", false
	}
	return platform, private, channel, channel != "" && platformProblem(platform) == ""
}

// toMessage turns a message-created event into a chat message; ok is
// false for one the bot does not read (its own, of a platform not
// allowed, or not a message).
func (a *Adapter) toMessage(e event) (adapter.Message, bool) {
	platform, self := e.platform(), e.selfID()
	if e.Message == nil || e.Channel == nil || e.Channel.ID == "" || platform == "" || !a.platformAllowed(platform) {
		return adapter.Message{}, false
	}
	if platformProblem(platform) != "" {
		return adapter.Message{}, false
	}
	sender := e.User
	if sender == nil {
		sender = e.Message.User
	}
	if sender == nil || sender.ID == "" {
		return adapter.Message{}, false
	}
	private := e.Channel.Type != nil && *e.Channel.Type == channelDirect || e.Channel.Type == nil && e.Guild == nil
	key := chatKey(platform, private, e.Channel.ID)

	a.mu.Lock()
	var names, sentIDs []string
	if l := a.logins[loginKey(platform, self)]; l != nil {
		names, sentIDs = slices.Clone(l.names), slices.Clone(l.sentIDs)
	}
	if self != "" {
		a.chatLogin[key] = self
	}
	proxies := slices.Clone(a.proxyURLs)
	a.mu.Unlock()

	re := adapter.Event{Private: private, Group: e.Channel.ID, FromSelf: self != "" && sender.ID == self, BotNames: names}
	if !a.rule.Allowed(re) {
		return adapter.Message{}, false
	}
	m := adapter.Message{ChatKey: key, UserID: adapter.UserID(Platform, platform+":"+sender.ID), UserName: sender.displayName()}
	if e.Member != nil {
		if e.Member.Nick != "" {
			m.UserName = e.Member.Nick
		} else if e.Member.Name != "" {
			m.UserName = e.Member.Name
		}
	}
	botName := "bot"
	if len(a.cfg.BotNames) > 0 {
		botName = a.cfg.BotNames[0]
	} else if len(names) > 0 {
		botName = names[0]
	}

	r := reader{self: self, botName: botName, sentIDs: sentIDs, msgID: e.Message.ID}
	r.walk(parseElements(e.Message.Content))
	text := strings.TrimSpace(r.text.String())
	quote := r.quote
	if quote == nil && e.Message.Quote != nil {
		quote = &quoted{id: e.Message.Quote.ID}
		if u := e.Message.Quote.User; u != nil {
			quote.userID, quote.userName = u.ID, u.displayName()
		}
		var qr reader
		qr.walk(parseElements(e.Message.Quote.Content))
		quote.text = strings.TrimSpace(qr.text.String())
	}
	if quote != nil {
		if self != "" && quote.userID == self || quote.id != "" && slices.Contains(sentIDs, quote.id) {
			r.mention = true
			if quote.userName == "" {
				quote.userName = botName
			}
		}
		text = quote.note() + " " + text
	}
	re.Mention = r.mention

	for i, f := range r.files {
		af, note := a.fileIn(f, i, e.Message.ID, proxies)
		if note != "" {
			text += " " + note
			continue
		}
		m.Files = append(m.Files, af)
	}
	m.Text = strings.TrimSpace(text)
	re.Text = m.Text
	// Other bots are context, never asked: two bots must not answer each
	// other forever.
	m.Trigger = a.rule.Answer(re) && !sender.IsBot
	return m, true
}

// quoted is the message a reply quotes.
type quoted struct {
	id, userID, userName, text string
}

func (q *quoted) note() string {
	who := q.userName
	if who == "" {
		who = q.userID
	}
	body := []rune(strings.Join(strings.Fields(q.text), " "))
	if len(body) > 80 {
		body = append(body[:80], '…')
	}
	switch {
	case who != "" && len(body) > 0:
		return fmt.Sprintf("[reply to %s: %s]", who, string(body))
	case who != "":
		return fmt.Sprintf("[reply to %s]", who)
	case q.id != "":
		return fmt.Sprintf("[reply to message %s]", q.id)
	}
	return "[reply]"
}

// resource is an img, file, audio or video element of a message.
type resource struct {
	kind, src, title string
}

// reader renders a message's elements as words: mentions as @name, links
// with their URL; it collects resources and the quote, and notes a
// mention of the bot.
type reader struct {
	self, botName, msgID string
	sentIDs              []string
	text                 strings.Builder
	files                []resource
	quote                *quoted
	mention              bool
}

func (r *reader) walk(els []element) {
	for _, el := range els {
		switch el.name {
		case "":
			r.text.WriteString(el.text)
		case "at":
			switch id, typ := el.attr("id"), el.attr("type"); {
			case r.self != "" && id == r.self:
				r.mention = true
				r.text.WriteString("@" + r.botName)
			case typ == "all" || typ == "here":
				r.text.WriteString("@" + typ)
			case el.attr("name") != "":
				r.text.WriteString("@" + el.attr("name"))
			case id != "":
				r.text.WriteString("@" + id)
			case el.attr("role") != "":
				r.text.WriteString("@role")
			}
		case "sharp":
			name := el.attr("name")
			if name == "" {
				name = el.attr("id")
			}
			r.text.WriteString("#" + name)
		case "a":
			var inner reader
			inner.walk(el.children)
			t, href := inner.text.String(), el.attr("href")
			r.text.WriteString(t)
			if href != "" && href != t {
				r.text.WriteString(" (" + href + ")")
			}
		case "img", "image", "file", "audio", "video":
			kind := "file"
			if el.name == "img" || el.name == "image" {
				kind = "image"
			}
			if src := el.attr("src"); src != "" {
				r.files = append(r.files, resource{kind: kind, src: src, title: el.attr("title")})
			}
		case "quote":
			q := &quoted{id: el.attr("id")}
			var inner reader
			for _, c := range el.children {
				switch c.name {
				case "author", "user":
					q.userID, q.userName = c.attr("id"), c.attr("name")
					if q.userName == "" {
						q.userName = c.attr("nick")
					}
				case "member", "channel", "quote":
				default:
					inner.walk([]element{c})
				}
			}
			q.text = inner.text.String()
			r.quote = q
		case "br":
			r.text.WriteString("\n")
		case "p", "message":
			r.walk(el.children)
			r.text.WriteString("\n")
		case "face", "emoji":
			if n := el.attr("name"); n != "" {
				r.text.WriteString("[" + n + "]")
			}
		case "author", "button":
		default: // styling (b, i, u, s, code, spl, ...) and elements of a platform: their text
			r.walk(el.children)
		}
	}
}

// fileIn is a resource as a file for nekro to fetch, or a note to put in
// the text instead when it cannot be fetched.
func (a *Adapter) fileIn(f resource, i int, msgID string, proxies []string) (adapter.File, string) {
	name := f.title
	out := adapter.File{Kind: f.kind}
	src := f.src
	for _, p := range proxies {
		if p != "" && strings.HasPrefix(src, p) {
			// The server serves this resource itself, at its proxy route.
			src = a.base + "/v1/proxy/" + src
			break
		}
	}
	u, err := url.Parse(src)
	switch {
	case err == nil && u.Scheme == "data":
		mt, data, ok := decodeDataURL(src)
		if !ok {
			return out, fmt.Sprintf("[%s %s in a data: URL nekro cannot read]", f.kind, fileName(name, i))
		}
		out.Data = data
		if name == "" {
			if exts, _ := mime.ExtensionsByType(mt); len(exts) > 0 {
				name = fmt.Sprintf("%s-%s-%d%s", f.kind, safeID(msgID), i+1, exts[0])
			}
		}
	case err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "":
		out.URL = src
		if name == "" {
			if b := path.Base(u.Path); b != "." && b != "/" && b != "" && strings.Contains(b, ".") {
				name = b
			}
		}
	default:
		return out, fmt.Sprintf("[%s %s at a URL nekro cannot fetch: %.80s]", f.kind, fileName(name, i), f.src)
	}
	if name == "" {
		name = fmt.Sprintf("%s-%s-%d", f.kind, safeID(msgID), i+1)
		if f.kind == "image" {
			name += ".png" // a name for the model; the bytes are what they are
		}
	}
	out.Name = name
	return out, ""
}

func fileName(name string, i int) string {
	if name != "" {
		return name
	}
	return fmt.Sprintf("#%d", i+1)
}

// safeID keeps the letters and digits of a message id, for file names.
func safeID(id string) string {
	var b strings.Builder
	for _, r := range id {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	if s := b.String(); s != "" && len(s) <= 40 {
		return s
	} else if len(s) > 40 {
		return s[len(s)-40:]
	}
	return "msg"
}

// decodeDataURL reads a data: URL (RFC 2397), base64 or percent-encoded.
func decodeDataURL(s string) (mimeType string, data []byte, ok bool) {
	rest, ok := strings.CutPrefix(s, "data:")
	if !ok {
		return "", nil, false
	}
	meta, payload, ok := strings.Cut(rest, ",")
	if !ok {
		return "", nil, false
	}
	isB64 := strings.HasSuffix(meta, ";base64")
	mimeType = strings.TrimSuffix(meta, ";base64")
	if i := strings.IndexByte(mimeType, ';'); i >= 0 {
		mimeType = mimeType[:i]
	}
	if isB64 {
		b, err := base64.StdEncoding.DecodeString(payload)
		if err != nil {
			b, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(payload, "="))
		}
		return mimeType, b, err == nil
	}
	t, err := url.PathUnescape(payload)
	return mimeType, []byte(t), err == nil
}
