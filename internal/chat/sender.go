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
	"sync"
	"unicode/utf8"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/pluginhost"
)

// Limits of what a chat stores. A sandbox run writes to its chat through
// a RunSender, which also holds the run to a budget, so code that loops
// on send_msg_text cannot fill the database or the next prompt.
const (
	// MaxAttachmentBytes caps one attachment.
	MaxAttachmentBytes = 64 << 20
	// MaxTextBytes caps the text of one message, whoever writes it.
	MaxTextBytes = 64 << 10
	// MaxRunMessages caps the messages one run stores (texts, files and
	// recorded method results together).
	MaxRunMessages = 50
	// MaxRunAttachmentBytes caps the attachments one run sends, together.
	MaxRunAttachmentBytes = 64 << 20
)

// ErrTextTooLong is returned for a message text over MaxTextBytes.
var ErrTextTooLong = errors.New("message text too long")

// ErrRunLimit is returned when a run has used up its budget of messages
// or attachment bytes.
var ErrRunLimit = errors.New("run limit reached")

// TruncateText cuts text that is over MaxTextBytes, for the messages the
// host writes itself (method results, notes), and ends it with a note
// saying how long it was. Text within the limit is returned as is.
func TruncateText(text string) string {
	if len(text) <= MaxTextBytes {
		return text
	}
	note := fmt.Sprintf("\n[nekro: cut here: the text was %d bytes, over the %d KiB limit of a message]", len(text), MaxTextBytes>>10)
	keep := MaxTextBytes - len(note)
	for keep > 0 && !utf8.RuneStart(text[keep]) {
		keep--
	}
	return text[:keep] + note
}

// SaveAttachment stores content in the chat's uploads directory, where the
// chat's sandbox reads it at /app/uploads/<name>. name is sanitized; when a
// file of that name exists, a numbered name is chosen, so an attachment is
// never overwritten. kind is "file" or "image"; an image must sniff as one.
func (s *Service) SaveAttachment(ctx context.Context, chatKey, name, kind string, content io.Reader) (Attachment, error) {
	return s.saveAttachment(ctx, chatKey, name, kind, content, MaxAttachmentBytes,
		fmt.Errorf("larger than the %d MiB limit", MaxAttachmentBytes>>20))
}

// saveAttachment is SaveAttachment with a size limit: content over limit
// bytes is removed again and fails with tooLarge.
func (s *Service) saveAttachment(ctx context.Context, chatKey, name, kind string, content io.Reader, limit int64, tooLarge error) (Attachment, error) {
	if kind != "file" && kind != "image" && kind != kindAuto {
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
	if kind == kindAuto {
		kind = "file"
		if strings.HasPrefix(mime, "image/") && mime != "image/svg+xml" {
			kind = "image" // what sniffs as a raster image; SVG is text a script may read
		}
	}
	dir, err := s.layout.EnsureUploadsDir(chatKey)
	if err != nil {
		return Attachment{}, err
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
		// On PostgreSQL the name is reserved across replicas first.
		reserved, err := s.reserveName(ctx, chatKey, final)
		if err != nil {
			return Attachment{}, err
		}
		if reserved {
			f, err = root.OpenFile(final, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err == nil {
				break
			}
			s.dropFile(context.WithoutCancel(ctx), chatKey, final)
		} else {
			err = fs.ErrExist
		}
		if !errors.Is(err, fs.ErrExist) || i > 1000 {
			return Attachment{}, fmt.Errorf("attachment %s: %w", name, err)
		}
		final, err = files.SanitizeFileName(fmt.Sprintf("%s-%d%s", stem, i, ext))
		if err != nil {
			return Attachment{}, fmt.Errorf("attachment: %w", err)
		}
	}
	n, err := io.Copy(f, io.LimitReader(ctxReader{ctx, br}, limit+1))
	if err == nil && n > limit {
		err = tooLarge
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.storeCopy(ctx, root, chatKey, final) // for the other replicas
	}
	if err != nil {
		root.Remove(final)
		s.dropFile(context.WithoutCancel(ctx), chatKey, final)
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

// Sender returns what the plugins of one sandbox run of chatKey send
// through: their messages become assistant messages of that chat, and of
// no other. turnID tags the messages with the turn they belong to (0 for
// none). Use a new RunSender for every run: it holds the run to
// MaxRunMessages messages and MaxRunAttachmentBytes of attachments.
func (s *Service) Sender(chatKey string, turnID int64) *RunSender {
	return &RunSender{s: s, chatKey: chatKey, turnID: turnID}
}

// RunSender is the pluginhost.ChatSender of one run. It is safe for
// concurrent use.
type RunSender struct {
	s       *Service
	chatKey string
	turnID  int64

	mu       sync.Mutex
	messages int  // messages stored or being stored
	dropped  bool // a recorded result was dropped, and the note about it written
	attMu    sync.Mutex
	attBytes int64 // attachment bytes stored (guarded by attMu)
}

var _ pluginhost.ChatSender = (*RunSender)(nil)

// reserve takes one message of the run's budget.
func (c *RunSender) reserve() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.messages >= MaxRunMessages {
		return fmt.Errorf("%w: this run already sent %d messages, the most one run may send; put more into each message",
			ErrRunLimit, MaxRunMessages)
	}
	c.messages++
	return nil
}

// release gives back a message that was not stored.
func (c *RunSender) release() {
	c.mu.Lock()
	c.messages--
	c.mu.Unlock()
}

// SendText stores text as an assistant message. Text over MaxTextBytes
// is refused with an error naming its size and the limit.
func (c *RunSender) SendText(ctx context.Context, text string) error {
	if strings.TrimSpace(text) == "" {
		return errors.New("the message is empty")
	}
	if len(text) > MaxTextBytes {
		return textTooLong(len(text)) // before the budget: a refused text costs nothing
	}
	if err := c.reserve(); err != nil {
		return err
	}
	_, err := c.s.AddMessage(ctx, Message{ChatKey: c.chatKey, Role: Assistant, SenderID: AssistantID,
		SenderName: "assistant", Text: text, TurnID: c.turnID})
	if err != nil {
		c.release()
	}
	return err
}

func (c *RunSender) SendFile(ctx context.Context, name string, content io.Reader) error {
	return c.send(ctx, name, "file", content)
}

func (c *RunSender) SendImage(ctx context.Context, name string, content io.Reader) error {
	return c.send(ctx, name, "image", content)
}

func (c *RunSender) send(ctx context.Context, name, kind string, content io.Reader) error {
	if err := c.reserve(); err != nil {
		return err
	}
	// One attachment of the run at a time, so the byte budget holds.
	c.attMu.Lock()
	defer c.attMu.Unlock()
	left := int64(MaxRunAttachmentBytes) - c.attBytes
	limit := min(left, MaxAttachmentBytes)
	tooLarge := fmt.Errorf("larger than the %d MiB limit", MaxAttachmentBytes>>20)
	if left < MaxAttachmentBytes {
		tooLarge = fmt.Errorf("%w: it would take this run's attachments over %d MiB, the most one run may send (%d bytes are left)",
			ErrRunLimit, MaxRunAttachmentBytes>>20, left)
	}
	if left <= 0 {
		c.release()
		return fmt.Errorf("attachment %s: %w", name, tooLarge)
	}
	a, err := c.s.saveAttachment(ctx, c.chatKey, name, kind, content, limit, tooLarge)
	if err != nil {
		c.release()
		return err
	}
	c.attBytes += a.Size
	_, err = c.s.AddMessage(ctx, Message{ChatKey: c.chatKey, Role: Assistant, SenderID: AssistantID,
		SenderName: "assistant", Attachments: []Attachment{a}, TurnID: c.turnID})
	if err != nil {
		c.release()
	}
	return err
}

// AddSystem stores text as a system message of the run (a plugin's push,
// Ctx.PushSystem), as Record does. With wake it waits for a turn as a
// user message does, and the agent is told (Service.OnWake).
func (c *RunSender) AddSystem(ctx context.Context, text string, wake bool) error {
	if !wake {
		_, err := c.Record(ctx, text)
		return err
	}
	if err := c.reserve(); err != nil {
		return err
	}
	if _, err := c.s.AddMessage(ctx, Message{ChatKey: c.chatKey, Role: System, SenderID: SystemID, SenderName: "SYSTEM",
		Text: TruncateText(text), Wake: true}); err != nil {
		c.release()
		return err
	}
	c.s.woke(c.chatKey)
	return nil
}

// Record stores text as a system message of the run: the host's record of
// a method's result. Text over MaxTextBytes is cut, with a note. Records
// count against the run's message budget; the first one past it is
// replaced by a note saying that later results go unrecorded, and Record
// then returns an error wrapping ErrRunLimit.
func (c *RunSender) Record(ctx context.Context, text string) (Message, error) {
	if err := c.reserve(); err != nil {
		c.mu.Lock()
		first := !c.dropped
		c.dropped = true
		c.mu.Unlock()
		if first {
			c.s.AddMessage(ctx, Message{ChatKey: c.chatKey, Role: System, SenderID: SystemID, SenderName: "SYSTEM",
				Text: fmt.Sprintf("nekro: this run reached its limit of %d messages; the results of its later method calls are not recorded in the chat",
					MaxRunMessages), TurnID: c.turnID})
		}
		return Message{}, err
	}
	m, err := c.s.AddMessage(ctx, Message{ChatKey: c.chatKey, Role: System, SenderID: SystemID, SenderName: "SYSTEM",
		Text: TruncateText(text), TurnID: c.turnID})
	if err != nil {
		c.release()
	}
	return m, err
}

func textTooLong(n int) error {
	return fmt.Errorf("%w: the message is %d bytes, over the %d KiB (%d bytes) limit of a message; send less, or split it",
		ErrTextTooLong, n, MaxTextBytes>>10, MaxTextBytes)
}
