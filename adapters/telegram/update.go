package telegram

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/nekro-go/nekro/adapter"
)

// The parts of the Bot API's objects the adapter reads.

type update struct {
	UpdateID int64    `json:"update_id"`
	Message  *message `json:"message"`
}

type user struct {
	ID        int64  `json:"id"`
	IsBot     bool   `json:"is_bot"`
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name"`
	Username  string `json:"username"`
}

type chatInfo struct {
	ID    int64  `json:"id"`
	Type  string `json:"type"` // private, group, supergroup, channel
	Title string `json:"title"`
}

type message struct {
	MessageID       int64       `json:"message_id"`
	From            *user       `json:"from"`
	Chat            chatInfo    `json:"chat"`
	Text            string      `json:"text"`
	Entities        []entity    `json:"entities"`
	Caption         string      `json:"caption"`
	CaptionEntities []entity    `json:"caption_entities"`
	Photo           []photoSize `json:"photo"`
	Document        *fileRef    `json:"document"`
	Video           *fileRef    `json:"video"`
	Audio           *fileRef    `json:"audio"`
	Voice           *fileRef    `json:"voice"`
	Animation       *fileRef    `json:"animation"`
	Sticker         *struct {
		Emoji string `json:"emoji"`
	} `json:"sticker"`
	ReplyToMessage *message `json:"reply_to_message"`
}

// entity is a MessageEntity: Offset and Length count UTF-16 code units.
type entity struct {
	Type   string `json:"type"`
	Offset int    `json:"offset"`
	Length int    `json:"length"`
	User   *user  `json:"user"` // text_mention
}

type photoSize struct {
	FileID   string `json:"file_id"`
	Width    int    `json:"width"`
	Height   int    `json:"height"`
	FileSize int64  `json:"file_size"`
}

// fileRef is a Document, Video, Audio, Voice or Animation: what the
// adapter reads of them is the same.
type fileRef struct {
	FileID   string `json:"file_id"`
	FileName string `json:"file_name"`
	MIMEType string `json:"mime_type"`
	FileSize int64  `json:"file_size"`
}

// tgFile is getFile's File.
type tgFile struct {
	FilePath string `json:"file_path"`
	FileSize int64  `json:"file_size"`
}

// handle hands one update to nekro. It reports whether the update was a
// message stored (for the status's count).
func (a *Adapter) handle(ctx context.Context, h adapter.Host, u update) {
	if u.Message == nil {
		return // allowed_updates asks for messages only; anything else is passed over
	}
	m, ok := a.toMessage(ctx, h, u.Message)
	if !ok {
		return
	}
	if err := h.Receive(ctx, m); err != nil {
		h.Log().Warn("Telegram message not stored", "chat", m.ChatKey, "err", err)
		return
	}
	a.setStatus(func(s *adapter.Status) { s.Received++ })
}

// toMessage turns a Telegram message into a chat message; ok is false
// for one the bot does not read (a channel's, or of a chat not allowed).
func (a *Adapter) toMessage(ctx context.Context, h adapter.Host, msg *message) (adapter.Message, bool) {
	me := a.bot()
	var channel string
	private := false
	switch msg.Chat.Type {
	case "private":
		channel, private = "private_"+strconv.FormatInt(msg.Chat.ID, 10), true
	case "group", "supergroup":
		channel = "group_" + strconv.FormatInt(msg.Chat.ID, 10)
	default:
		return adapter.Message{}, false // channels: the bot posts there, it does not converse
	}
	if msg.From == nil {
		return adapter.Message{}, false // sent on behalf of a chat (anonymous admins, linked channels)
	}
	chatID := strconv.FormatInt(msg.Chat.ID, 10)
	if len(a.cfg.Chats) > 0 && !slices.Contains(a.cfg.Chats, chatID) {
		a.ignoredOnce(h, chatID, msg.Chat)
		return adapter.Message{}, false
	}
	re := adapter.Event{Private: private, Group: chatID, FromSelf: msg.From.ID == me.ID, BotNames: me.names()}
	if !a.rule.Allowed(re) {
		return adapter.Message{}, false
	}
	m := adapter.Message{ChatKey: adapter.ChatKey(Platform, channel), UserID: adapter.UserID(Platform, strconv.FormatInt(msg.From.ID, 10)),
		UserName: displayName(msg.From)}

	text, entities := msg.Text, msg.Entities
	if text == "" {
		text, entities = msg.Caption, msg.CaptionEntities
	}
	text, mention := readEntities(text, entities, me)
	re.Mention = mention
	if r := msg.ReplyToMessage; r != nil {
		if r.From != nil && r.From.ID == me.ID {
			re.Mention = true
		}
		text = fmt.Sprintf("[reply to message %d] %s", r.MessageID, text)
	}
	var notes []string
	for _, f := range filesOf(msg) {
		file, err := a.file(ctx, f)
		if err != nil {
			h.Log().Warn("a Telegram file could not be located (getFile)", "chat", m.ChatKey, "file", f.name, "err", err)
			notes = append(notes, fmt.Sprintf("[%s %s could not be fetched: %v]", f.kind, f.name, err))
			continue
		}
		m.Files = append(m.Files, file)
	}
	if msg.Sticker != nil {
		notes = append(notes, "[sticker "+msg.Sticker.Emoji+"]")
	}
	if len(notes) > 0 {
		text = strings.TrimSpace(text + "\n" + strings.Join(notes, "\n"))
	}
	m.Text = strings.TrimSpace(text)
	re.Text = m.Text
	m.Trigger = a.rule.Answer(re)
	if !private { // for chat commands, which are answered with or without a trigger
		m.Admin = a.isAdmin(ctx, h, msg.Chat.ID, msg.From.ID)
	}
	return m, true
}

// displayName is "First Last (@username)", as much of it as the user has.
func displayName(u *user) string {
	name := strings.TrimSpace(u.FirstName + " " + u.LastName)
	switch {
	case name == "" && u.Username != "":
		return "@" + u.Username
	case u.Username != "":
		return name + " (@" + u.Username + ")"
	case name == "":
		return strconv.FormatInt(u.ID, 10)
	}
	return name
}

// readEntities looks at a text's entities (offsets in UTF-16 code units,
// as the Bot API counts): an @username mention of the bot, a text_mention
// of it, or a command addressed to it (/cmd@botname, rewritten to /cmd so
// nekro's commands read it). It returns the text and whether the bot is
// addressed.
func readEntities(text string, entities []entity, me botInfo) (string, bool) {
	units := utf16.Encode([]rune(text))
	slice := func(e entity) (string, bool) {
		if e.Offset < 0 || e.Length <= 0 || e.Offset+e.Length > len(units) {
			return "", false
		}
		return string(utf16.Decode(units[e.Offset : e.Offset+e.Length])), true
	}
	mention := false
	for _, e := range entities {
		s, ok := slice(e)
		if !ok {
			continue
		}
		switch e.Type {
		case "mention":
			if me.Username != "" && strings.EqualFold(s, "@"+me.Username) {
				mention = true
			}
		case "text_mention":
			if e.User != nil && e.User.ID == me.ID {
				mention = true
			}
		case "bot_command":
			cmd, to, ok := strings.Cut(s, "@")
			if ok && me.Username != "" && strings.EqualFold(to, me.Username) {
				mention = true
				if e.Offset == 0 {
					// "/help@nekko_bot args" -> "/help args"
					text = cmd + string(utf16.Decode(units[e.Offset+e.Length:]))
				}
			}
		}
	}
	return text, mention
}

// wanted is one file of a message, before getFile.
type wanted struct {
	id, name, kind string
}

// filesOf lists a message's files: its photo (the largest size), and
// any document, video, audio, voice note or animation.
func filesOf(msg *message) []wanted {
	var out []wanted
	if len(msg.Photo) > 0 {
		best := msg.Photo[0]
		for _, p := range msg.Photo[1:] {
			if p.Width*p.Height >= best.Width*best.Height {
				best = p
			}
		}
		out = append(out, wanted{id: best.FileID, kind: "image"})
	}
	for _, f := range []*fileRef{msg.Document, msg.Video, msg.Audio, msg.Voice, msg.Animation} {
		if f == nil || f.FileID == "" {
			continue
		}
		kind := "file"
		if strings.HasPrefix(f.MIMEType, "image/") {
			kind = "image"
		}
		out = append(out, wanted{id: f.FileID, name: f.FileName, kind: kind})
	}
	return out
}

// file asks where a file is (getFile) and returns it for nekro to
// download: its URL holds the token, named as the File's Secret.
func (a *Adapter) file(ctx context.Context, w wanted) (adapter.File, error) {
	var f tgFile
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if err := a.api.call(ctx, "getFile", jsonBody(map[string]any{"file_id": w.id}), &f); err != nil {
		return adapter.File{}, err
	}
	if f.FilePath == "" {
		return adapter.File{}, fmt.Errorf("telegram getFile: no file_path (the file may be over the Bot API's 20 MB download limit)")
	}
	name := w.name
	if name == "" {
		name = path.Base(f.FilePath)
	}
	return adapter.File{Name: name, Kind: w.kind, URL: a.api.fileURL(f.FilePath), Secret: a.cfg.Token}, nil
}

// isAdmin says whether user administers the group (its creator or an
// administrator, getChatAdministrators), cached ten minutes per group; a
// failed lookup counts as no and is tried again after a minute.
func (a *Adapter) isAdmin(ctx context.Context, h adapter.Host, chatID, userID int64) bool {
	a.mu.Lock()
	c, ok := a.admins[chatID]
	a.mu.Unlock()
	if !ok || time.Now().After(c.expires) {
		var members []struct {
			User user `json:"user"`
		}
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := a.api.call(ctx, "getChatAdministrators", jsonBody(map[string]any{"chat_id": chatID}), &members)
		cancel()
		c = cachedAdmins{ids: map[int64]bool{}, expires: time.Now().Add(10 * time.Minute)}
		if err != nil {
			h.Log().Info("Telegram: the group's administrators are unknown; its members count as non-admins for a minute", "chat", chatID, "err", err)
			c.expires = time.Now().Add(time.Minute)
		}
		for _, m := range members {
			c.ids[m.User.ID] = true
		}
		a.mu.Lock()
		a.admins[chatID] = c
		a.mu.Unlock()
	}
	return c.ids[userID]
}

type cachedAdmins struct {
	ids     map[int64]bool
	expires time.Time
}

// ignoredOnce logs, once per chat, that a chat outside --telegram-chats
// wrote: it tells the operator the id to add.
func (a *Adapter) ignoredOnce(h adapter.Host, chatID string, c chatInfo) {
	a.mu.Lock()
	seen := a.ignored[chatID]
	a.ignored[chatID] = true
	a.mu.Unlock()
	if !seen {
		h.Log().Info("Telegram: messages of a chat not in --telegram-chats are ignored", "chat_id", chatID, "type", c.Type, "title", c.Title)
	}
}
