package qqbot

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nekro-go/nekro/adapter"
)

// Message types of the send API.
const (
	msgText  = 0
	msgMedia = 7
)

// Rich-media file types of the upload API.
const (
	fileImage = 1
	fileVideo = 2
)

// maxUpload bounds a file sent through the upload API (its bytes go as
// base64 in a JSON body).
const maxUpload = 20 << 20

// errLate marks a message the platform's reply window closed on.
var errLate = errors.New("the reply window closed")

// Send delivers m as passive replies to the chat's latest user message:
// the text (msg_type 0), then each image or video uploaded
// (POST /v2/.../files) and sent as a media message (msg_type 7).
func (a *Adapter) Send(ctx context.Context, m adapter.Outgoing) error {
	platform, channel, ok := adapter.SplitChatKey(m.ChatKey)
	if !ok || platform != Platform {
		return fmt.Errorf("chat %s is not a QQ bot chat", m.ChatKey)
	}
	kind, id, ok := strings.Cut(channel, "_")
	if !ok || (kind != "group" && kind != "private") || id == "" || strings.ContainsAny(id, "/?#%") {
		return fmt.Errorf("chat %s: want qqbot-group_<group openid> or qqbot-private_<user openid>", m.ChatKey)
	}
	base := "/v2/users/" + id
	if kind == "group" {
		base = "/v2/groups/" + id
	}
	if err := a.replyOpen(m.ChatKey); err != nil {
		return a.late(m.ChatKey, err)
	}

	text := strings.TrimSpace(m.Text)
	var media []string // file_info of each uploaded file
	for _, f := range m.Files {
		ft, ok := fileType(f)
		if !ok {
			text = strings.TrimSpace(text + fmt.Sprintf("\n[file %s: the QQ bot platform does not take files from bots yet]", f.Name))
			continue
		}
		info, err := a.upload(ctx, base, ft, f)
		if err != nil {
			return fmt.Errorf("chat %s: %w", m.ChatKey, err)
		}
		media = append(media, info)
	}
	if text != "" {
		if err := a.post(ctx, m.ChatKey, base, map[string]any{"content": text, "msg_type": msgText}); err != nil {
			return err
		}
	}
	for _, info := range media {
		// The documentation asks for some content with msg_type 7.
		if err := a.post(ctx, m.ChatKey, base, map[string]any{"content": " ", "msg_type": msgMedia, "media": map[string]string{"file_info": info}}); err != nil {
			return err
		}
	}
	a.setStatus(func(s *adapter.Status) { s.Sent++ })
	return nil
}

// post sends one message as the next reply to the chat's latest user
// message: its msg_id and the next msg_seq.
func (a *Adapter) post(ctx context.Context, chatKey, base string, body map[string]any) error {
	msgID, seq, err := a.nextReply(chatKey)
	if err != nil {
		return a.late(chatKey, err)
	}
	body["msg_id"], body["msg_seq"] = msgID, seq
	var ans struct {
		ID string `json:"id"`
	}
	if err := a.api.do(ctx, "POST", base+"/messages", body, &ans); err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.Code == codeReplyExpired {
			return a.late(chatKey, fmt.Errorf("%w: %w", errLate, err))
		}
		return fmt.Errorf("chat %s: %w", chatKey, err)
	}
	return nil
}

// replyOpen says whether the chat has a user message whose reply window
// is still open.
func (a *Adapter) replyOpen(chatKey string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.replyErr(a.replies[chatKey])
}

func (a *Adapter) replyErr(r *reply) error {
	if r == nil {
		return fmt.Errorf("%w: no user message since nekro started to reply to (the platform takes only replies from bots)", errLate)
	}
	if age := time.Since(r.at); age > r.window {
		return fmt.Errorf("%w: the user's latest message came %s ago, and the platform takes replies for %s only", errLate, age.Round(time.Second), r.window)
	}
	return nil
}

// nextReply is the msg_id and msg_seq of the chat's next reply.
func (a *Adapter) nextReply(chatKey string) (string, int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.replies[chatKey]
	if err := a.replyErr(r); err != nil {
		return "", 0, err
	}
	r.seq++
	return r.msgID, r.seq, nil
}

// late reports a message that cannot go out because the reply window
// closed: as an error in the log and in the status.
func (a *Adapter) late(chatKey string, err error) error {
	err = fmt.Errorf("chat %s: message not sent: %w", chatKey, err)
	a.mu.Lock()
	log := a.log
	a.status.LastError = err.Error()
	// Logged once per user message: nekro's delivery queue retries it,
	// and the chat's other messages of the turn are as late.
	key := chatKey
	if r := a.replies[chatKey]; r != nil {
		key += " " + r.msgID
	}
	first := log != nil && a.lateLogged.add(key)
	a.mu.Unlock()
	if first {
		log.Error("QQ bot: a message was not sent: the platform takes only replies to a user's message within its reply window", "chat", chatKey, "err", err)
	}
	return err
}

// upload sends f's bytes to the rich-media upload API and returns the
// file_info a media message names.
func (a *Adapter) upload(ctx context.Context, base string, ft int, f adapter.OutFile) (string, error) {
	rc, err := f.Open()
	if err != nil {
		return "", fmt.Errorf("file %s: %w", f.Name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxUpload+1))
	if err != nil {
		return "", fmt.Errorf("file %s: %w", f.Name, err)
	}
	if len(b) > maxUpload {
		return "", fmt.Errorf("file %s is larger than the %d MiB nekro uploads to QQ", f.Name, maxUpload>>20)
	}
	var ans struct {
		FileInfo string `json:"file_info"`
	}
	err = a.api.do(ctx, "POST", base+"/files", map[string]any{"file_type": ft, "file_data": base64.StdEncoding.EncodeToString(b), "srv_send_msg": false}, &ans)
	if err != nil {
		return "", fmt.Errorf("upload %s: %w", f.Name, err)
	}
	if ans.FileInfo == "" {
		return "", fmt.Errorf("upload %s: no file_info in the answer", f.Name)
	}
	return ans.FileInfo, nil
}

// fileType is the upload API's type for f; ok false for a file the
// platform does not take from bots.
func fileType(f adapter.OutFile) (int, bool) {
	switch {
	case f.Kind == "image" || strings.HasPrefix(f.MIME, "image/"):
		return fileImage, true
	case f.MIME == "video/mp4" || strings.HasSuffix(strings.ToLower(f.Name), ".mp4"):
		return fileVideo, true
	}
	return 0, false
}
