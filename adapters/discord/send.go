package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/textproto"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/nekro-go/nekro/adapter"
)

// noMentions is the allowed_mentions of every message sent: nothing the
// model writes (@everyone, @here, <@id>, <@&role>) pings anyone.
var noMentions = map[string]any{"parse": []string{}, "replied_user": false}

// outFile is a file read for a message.
type outFile struct {
	name, mime string
	data       []byte
}

// Send delivers m to its channel (POST /channels/{id}/messages): the
// text in parts of at most 2,000 characters, the files attached to the
// last part (ten a message; more go in messages of their own).
func (a *Adapter) Send(ctx context.Context, m adapter.Outgoing) error {
	platform, channel, ok := adapter.SplitChatKey(m.ChatKey)
	if !ok || platform != Platform {
		return fmt.Errorf("chat %s is not a Discord chat", m.ChatKey)
	}
	kind, id, ok := strings.Cut(channel, "_")
	if !ok || (kind != "group" && kind != "private") || !snowflake(id) {
		return fmt.Errorf("chat %s: want discord-group_<channel id> or discord-private_<channel id>", m.ChatKey)
	}
	var files [][]outFile
	for i, f := range m.Files {
		of, err := readOut(f)
		if err != nil {
			return err
		}
		if i%maxFilesPerPost == 0 {
			files = append(files, nil)
		}
		files[len(files)-1] = append(files[len(files)-1], of)
	}
	parts := splitText(m.Text, maxTextUnits)
	for i, text := range parts {
		var attach []outFile
		if i == len(parts)-1 && len(files) > 0 {
			attach, files = files[0], files[1:]
		}
		if text == "" && len(attach) == 0 {
			continue // nothing to say
		}
		if err := a.post(ctx, id, text, attach); err != nil {
			return fmt.Errorf("chat %s: %w", m.ChatKey, err)
		}
	}
	for _, attach := range files {
		if err := a.post(ctx, id, "", attach); err != nil {
			return fmt.Errorf("chat %s: %w", m.ChatKey, err)
		}
	}
	a.setStatus(func(s *adapter.Status) { s.Sent++ })
	return nil
}

// post creates one message: JSON, or multipart with payload_json and
// files[n] when it carries files.
func (a *Adapter) post(ctx context.Context, channel, text string, files []outFile) error {
	payload := map[string]any{"content": text, "allowed_mentions": noMentions}
	r := request{method: "POST", path: "/channels/" + channel + "/messages"}
	if len(files) == 0 {
		b, err := json.Marshal(payload)
		if err != nil {
			return err
		}
		r.body, r.contentType = b, "application/json"
		return a.api.do(ctx, r, nil)
	}
	atts := make([]map[string]any, len(files))
	for i, f := range files {
		atts[i] = map[string]any{"id": i, "filename": f.name}
	}
	payload["attachments"] = atts
	pj, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="payload_json"`)
	h.Set("Content-Type", "application/json")
	pw, err := w.CreatePart(h)
	if err != nil {
		return err
	}
	pw.Write(pj)
	for i, f := range files {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="files[%d]"; filename=%s`, i, strconv.Quote(f.name)))
		h.Set("Content-Type", f.mime)
		fw, err := w.CreatePart(h)
		if err != nil {
			return err
		}
		fw.Write(f.data)
	}
	if err := w.Close(); err != nil {
		return err
	}
	r.body, r.contentType = body.Bytes(), w.FormDataContentType()
	return a.api.do(ctx, r, nil)
}

func readOut(f adapter.OutFile) (outFile, error) {
	rc, err := f.Open()
	if err != nil {
		return outFile{}, fmt.Errorf("file %s: %w", f.Name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return outFile{}, fmt.Errorf("file %s: %w", f.Name, err)
	}
	mime := f.MIME
	if mime == "" {
		mime = "application/octet-stream"
	}
	return outFile{name: f.Name, mime: mime, data: b}, nil
}

// splitText cuts text into parts of at most limit UTF-16 units (never
// more characters than Discord counts), at a line break or else a space
// in the part's second half when there is one. Blank text is no part,
// except that one empty part stands for it so files still go out.
func splitText(text string, limit int) []string {
	text = strings.TrimSpace(text)
	var out []string
	for text != "" {
		if units(text) <= limit {
			out = append(out, text)
			break
		}
		cut, n := 0, 0 // the byte offset where limit units end
		for i, r := range text {
			w := utf16.RuneLen(r)
			if w < 0 {
				w = 1
			}
			if n+w > limit {
				break
			}
			n += w
			cut = i + utf8.RuneLen(r)
		}
		if i := strings.LastIndexByte(text[:cut], '\n'); i > cut/2 {
			cut = i + 1
		} else if i := strings.LastIndexByte(text[:cut], ' '); i > cut/2 {
			cut = i + 1
		}
		if part := strings.TrimSpace(text[:cut]); part != "" {
			out = append(out, part)
		}
		text = strings.TrimSpace(text[cut:])
	}
	if len(out) == 0 {
		out = []string{""}
	}
	return out
}

func units(s string) int {
	n := 0
	for _, r := range s {
		if w := utf16.RuneLen(r); w > 0 {
			n += w
		} else {
			n++
		}
	}
	return n
}

// snowflake says s is a Discord id: decimal digits.
func snowflake(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
