package telegram

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/nekro-go/nekro/adapter"
)

// maxText is the longest text of one message, in UTF-16 code units (the
// Bot API's 4096 characters, counted as it counts entity offsets).
const maxText = 4096

// Send delivers m: its text as plain-text messages (no parse_mode: what
// the assistant writes is never read as Markdown or HTML, so it cannot
// fail to parse), split at maxText; then each image with sendPhoto (a
// photo Telegram refuses, too large or of odd dimensions, goes as a
// document) and each other file with sendDocument.
func (a *Adapter) Send(ctx context.Context, m adapter.Outgoing) error {
	platform, channel, ok := adapter.SplitChatKey(m.ChatKey)
	if !ok || platform != Platform {
		return fmt.Errorf("chat %s is not a Telegram chat", m.ChatKey)
	}
	kind, id, ok := strings.Cut(channel, "_")
	chatID, err := strconv.ParseInt(id, 10, 64)
	if !ok || (kind != "private" && kind != "group") || err != nil {
		return fmt.Errorf("chat %s: want telegram-private_<chat id> or telegram-group_<chat id>", m.ChatKey)
	}
	for _, part := range splitText(strings.TrimSpace(m.Text), maxText) {
		if err := a.sendTo(ctx, &chatID, func(chat int64) error {
			return a.api.call(ctx, "sendMessage", jsonBody(map[string]any{"chat_id": chat, "text": part}), nil)
		}); err != nil {
			return err
		}
	}
	for _, f := range m.Files {
		fields := func(chat int64) map[string]string { return map[string]string{"chat_id": strconv.FormatInt(chat, 10)} }
		err := errors.New("not an image")
		if f.Kind == "image" {
			err = a.sendTo(ctx, &chatID, func(chat int64) error {
				return a.api.call(ctx, "sendPhoto", multipartBody(fields(chat), "photo", f.Name, f.Open), nil)
			})
			var ae *apiError
			if err != nil && (!errors.As(err, &ae) || ae.Code != http.StatusBadRequest) {
				return fmt.Errorf("file %s: %w", f.Name, err)
			}
		}
		if err != nil {
			if err := a.sendTo(ctx, &chatID, func(chat int64) error {
				return a.api.call(ctx, "sendDocument", multipartBody(fields(chat), "document", f.Name, f.Open), nil)
			}); err != nil {
				return fmt.Errorf("file %s: %w", f.Name, err)
			}
		}
	}
	a.setStatus(func(s *adapter.Status) { s.Sent++ })
	return nil
}

// sendTo runs send for *chat; when the group became a supergroup (the
// API answers with migrate_to_chat_id) it sends again to the new id and
// keeps it for the rest of the message.
func (a *Adapter) sendTo(ctx context.Context, chat *int64, send func(int64) error) error {
	err := send(*chat)
	var ae *apiError
	if errors.As(err, &ae) && ae.MigrateTo != 0 && ctx.Err() == nil {
		*chat = ae.MigrateTo
		err = send(*chat)
	}
	return err
}

// splitText cuts s into parts of at most limit UTF-16 code units, at the
// last line break, else the last space, in the second half of a part;
// else where the limit falls (never inside a surrogate pair).
func splitText(s string, limit int) []string {
	var out []string
	for s != "" {
		units := utf16.Encode([]rune(s))
		if len(units) <= limit {
			out = append(out, s)
			break
		}
		// The longest prefix of whole runes within the limit.
		n, cut := 0, 0
		for i, r := range s {
			w := 1
			if r >= 0x10000 {
				w = 2
			}
			if n+w > limit {
				cut = i
				break
			}
			n += w
		}
		head := s[:cut]
		if i := strings.LastIndexByte(head, '\n'); i > len(head)/2 {
			cut = i + 1
		} else if i := strings.LastIndexByte(head, ' '); i > len(head)/2 {
			cut = i + 1
		}
		if part := strings.TrimRight(s[:cut], " \n"); part != "" {
			out = append(out, part)
		}
		s = s[cut:]
	}
	return out
}
