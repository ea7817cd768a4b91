package chat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// kindAuto asks saveAttachment to choose the kind from the content:
// "image" when it sniffs as a raster image, else "file".
const kindAuto = ""

// DefaultUploadName is the name a user's file gets when it came with
// none (or with one that is nothing but "." or "..").
const DefaultUploadName = "upload"

// ErrAttachmentTooLarge is returned by Upload.Add for content over the
// limit it was given; nothing of that file is kept.
var ErrAttachmentTooLarge = errors.New("attachment too large")

// Upload holds the files a user sends with one message while they are
// stored. Each file goes into the chat's uploads directory as it streams
// in (never whole in memory), under a sanitized name that overwrites
// nothing, where the chat's sandbox reads it at /app/uploads/<name>.
// Until the message that carries them is stored, Discard removes them
// all again: a message refused, dropped or failing halfway leaves no
// file behind. (A host killed between a file and its message can leave
// that file in the uploads; it is never shown as an attachment.)
//
// Pass it as agent.Incoming.Upload: Post attaches the files to the
// message, or discards them when the message is not stored.
type Upload struct {
	s       *Service
	chatKey string

	mu    sync.Mutex
	atts  []Attachment
	bytes int64
}

// NewUpload starts the files of one message of chatKey.
func (s *Service) NewUpload(chatKey string) *Upload {
	return &Upload{s: s, chatKey: chatKey}
}

// ChatKey is the chat the files go to.
func (u *Upload) ChatKey() string { return u.chatKey }

// Add stores content as one file of the message, reading it to the end.
// name is sanitized (DefaultUploadName when nothing is left of it); the
// kind is "image" when the content sniffs as a raster image, else
// "file". Content over limit bytes is removed again and fails with an
// error wrapping ErrAttachmentTooLarge; a full uploads volume fails with
// an error wrapping syscall.ENOSPC. A file that fails leaves nothing; the
// files added before it stay until Discard.
func (u *Upload) Add(ctx context.Context, name string, content io.Reader, limit int64) (Attachment, error) {
	name = uploadName(name)
	a, err := u.s.saveAttachment(ctx, u.chatKey, name, kindAuto, content, limit,
		fmt.Errorf("%w: %s is over %d bytes", ErrAttachmentTooLarge, name, limit))
	if err != nil {
		return Attachment{}, err
	}
	u.mu.Lock()
	u.atts = append(u.atts, a)
	u.bytes += a.Size
	u.mu.Unlock()
	return a, nil
}

// Attachments returns the files added so far, in order.
func (u *Upload) Attachments() []Attachment {
	if u == nil {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Attachment(nil), u.atts...)
}

// Bytes is the size of the files added so far, together.
func (u *Upload) Bytes() int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.bytes
}

// Discard removes every file added. Call it when the message that was to
// carry them is not stored; it is safe on a nil Upload.
func (u *Upload) Discard() error {
	if u == nil {
		return nil
	}
	u.mu.Lock()
	atts := u.atts
	u.atts, u.bytes = nil, 0
	u.mu.Unlock()
	if len(atts) == 0 {
		return nil
	}
	dir, err := u.s.layout.EnsureUploadsDir(u.chatKey)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("uploads dir: %w", err)
	}
	defer root.Close()
	var errs []error
	for _, a := range atts {
		if err := root.Remove(a.Name); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove upload %s: %w", a.Name, err))
		}
		if err := u.s.dropFile(context.Background(), u.chatKey, a.Name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// uploadName is name as a user's file is stored: what a client sent,
// with DefaultUploadName for an empty one. files.SanitizeFileName then
// makes it one safe name.
func uploadName(name string) string {
	name = strings.TrimSpace(strings.ReplaceAll(name, "\x00", ""))
	if name == "" || name == "." || name == ".." {
		return DefaultUploadName
	}
	return name
}
