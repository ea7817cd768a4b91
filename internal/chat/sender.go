package chat

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strings"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/plugin"
)

// MaxAttachmentBytes caps one attachment.
const MaxAttachmentBytes = 64 << 20

// SaveAttachment stores content in the chat's uploads directory, where the
// chat's sandbox reads it at /app/uploads/<name>. name is sanitized; when a
// file of that name exists, a numbered name is chosen, so an attachment is
// never overwritten. kind is "file" or "image"; an image must sniff as one.
func (s *Service) SaveAttachment(ctx context.Context, chatKey, name, kind string, content io.Reader) (Attachment, error) {
	if kind != "file" && kind != "image" {
		return Attachment{}, fmt.Errorf("attachment kind %q is not file or image", kind)
	}
	name, err := files.SanitizeFileName(name)
	if err != nil {
		return Attachment{}, fmt.Errorf("attachment: %w", err)
	}
	br := bufio.NewReaderSize(content, 512)
	head, err := br.Peek(512)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return Attachment{}, fmt.Errorf("attachment %s: %w", name, err)
	}
	mime := http.DetectContentType(head)
	if strings.HasSuffix(strings.ToLower(name), ".svg") && strings.Contains(string(head), "<svg") {
		mime = "image/svg+xml"
	}
	if kind == "image" && !strings.HasPrefix(mime, "image/") {
		return Attachment{}, fmt.Errorf("%s is not an image (its content is %s); send it with send_msg_file", name, mime)
	}
	dir := s.layout.UploadsDir(chatKey)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Attachment{}, fmt.Errorf("uploads dir: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Attachment{}, fmt.Errorf("uploads dir: %w", err)
	}
	defer root.Close()
	ext := path.Ext(name)
	stem := strings.TrimSuffix(name, ext)
	var f *os.File
	final := name
	for i := 1; ; i++ {
		f, err = root.OpenFile(final, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || i > 1000 {
			return Attachment{}, fmt.Errorf("attachment %s: %w", name, err)
		}
		final, err = files.SanitizeFileName(fmt.Sprintf("%s-%d%s", stem, i, ext))
		if err != nil {
			return Attachment{}, fmt.Errorf("attachment: %w", err)
		}
	}
	n, err := io.Copy(f, io.LimitReader(ctxReader{ctx, br}, MaxAttachmentBytes+1))
	if err == nil && n > MaxAttachmentBytes {
		err = fmt.Errorf("larger than the %d MiB limit", MaxAttachmentBytes>>20)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		root.Remove(final)
		return Attachment{}, fmt.Errorf("attachment %s: %w", name, err)
	}
	return Attachment{Name: final, Kind: kind, Path: files.SandboxUploads + "/" + final, MIME: mime, Size: n}, nil
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// Sender returns the plugin.ChatSender of runs of chatKey: what plugins
// send becomes assistant messages of that chat, and of no other. turnID
// tags the messages with the turn they belong to (0 for none).
func (s *Service) Sender(chatKey string, turnID int64) plugin.ChatSender {
	return &sender{s: s, chatKey: chatKey, turnID: turnID}
}

type sender struct {
	s       *Service
	chatKey string
	turnID  int64
}

func (c *sender) SendText(ctx context.Context, text string) error {
	if strings.TrimSpace(text) == "" {
		return errors.New("the message is empty")
	}
	_, err := c.s.AddMessage(ctx, Message{ChatKey: c.chatKey, Role: Assistant, SenderID: AssistantID,
		SenderName: "assistant", Text: text, TurnID: c.turnID})
	return err
}

func (c *sender) SendFile(ctx context.Context, name string, content io.Reader) error {
	return c.send(ctx, name, "file", content)
}

func (c *sender) SendImage(ctx context.Context, name string, content io.Reader) error {
	return c.send(ctx, name, "image", content)
}

func (c *sender) send(ctx context.Context, name, kind string, content io.Reader) error {
	a, err := c.s.SaveAttachment(ctx, c.chatKey, name, kind, content)
	if err != nil {
		return err
	}
	_, err = c.s.AddMessage(ctx, Message{ChatKey: c.chatKey, Role: Assistant, SenderID: AssistantID,
		SenderName: "assistant", Attachments: []Attachment{a}, TurnID: c.turnID})
	return err
}
