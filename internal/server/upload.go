package server

// Messages with files: POST /api/chats/{chat}/messages as
// multipart/form-data. The files stream into the chat's uploads as they
// arrive (never whole in memory) and become the message's attachments;
// a message refused for any reason leaves none of its files behind.

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"syscall"

	"github.com/nekro-go/nekro/internal/agent"
	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/plugin"
)

// Defaults of Options.UploadMaxFile and Options.UploadMaxMessage.
const (
	DefaultUploadMaxFile    = 32 << 20
	DefaultUploadMaxMessage = 64 << 20
)

// Bounds of one multipart message besides its files' bytes.
const (
	// maxUploadFiles is how many file parts one message may carry.
	maxUploadFiles = 32
	// maxUploadParts bounds the parts of any name (fields repeated,
	// unknown parts) before the request is refused.
	maxUploadParts = maxUploadFiles + 8
	// uploadOverhead is what the body may hold beyond the files' bytes:
	// part headers, boundaries and the fields.
	uploadOverhead = 1 << 20
)

// Flag names, for errors that tell the operator what to change.
const (
	flagUploadMaxFile    = "--upload-max-file"
	flagUploadMaxMessage = "--upload-max-message"
)

// isMultipart reports whether r's body is multipart/form-data.
func isMultipart(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "multipart/form-data"
}

// uploadLimits returns the per-file and per-message limits in force.
func (s *Server) uploadLimits() (file, message int64) {
	file, message = s.opts.UploadMaxFile, s.opts.UploadMaxMessage
	if file <= 0 {
		file = DefaultUploadMaxFile
	}
	if message <= 0 {
		message = DefaultUploadMaxMessage
	}
	return file, message
}

// postMultipart answers a multipart POST /api/chats/{chat}/messages:
// fields user_id, user_name and text (text may be empty when files come),
// and one or more "file" parts, in any order. Over a limit it answers 413
// naming the limit and its flag, a full uploads volume 507 naming
// --shared-quota, too many or unknown parts 400; in every such case
// nothing of the message is kept. Otherwise it answers as a JSON post
// does (202 with the message, its attachments included).
func (s *Server) postMultipart(w http.ResponseWriter, r *http.Request, key string) {
	maxFile, maxMessage := s.uploadLimits()
	body := http.MaxBytesReader(w, r.Body, maxMessage+uploadOverhead)
	r.Body = body
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, http.StatusBadRequest, "multipart body: %v", err)
		return
	}
	up := s.chats.NewUpload(key)
	// fail discards the files stored so far, reads what is left of the
	// body (up to its cap, so the client sees the answer rather than a
	// reset connection) and answers.
	fail := func(status int, format string, args ...any) {
		if err := up.Discard(); err != nil {
			s.log.Error("remove the files of a refused message", "chat", key, "err", err)
		}
		io.Copy(io.Discard, body)
		writeError(w, status, format, args...)
	}
	fields := map[string]string{}
	files := 0
	for parts := 0; ; parts++ {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
				fail(http.StatusRequestEntityTooLarge, "the request is over %d bytes: the message's files may take %d bytes together (%s)",
					maxMessage+uploadOverhead, maxMessage, flagUploadMaxMessage)
			} else {
				fail(http.StatusBadRequest, "multipart body: %v", err)
			}
			return
		}
		if parts >= maxUploadParts {
			fail(http.StatusBadRequest, "too many parts: send user_id, user_name, text and at most %d file parts", maxUploadFiles)
			return
		}
		switch field := p.FormName(); field {
		case "file":
			files++
			if files > maxUploadFiles {
				fail(http.StatusBadRequest, "too many files: a message carries at most %d", maxUploadFiles)
				return
			}
			left := maxMessage - up.Bytes()
			limit := min(maxFile, left)
			_, err := up.Add(r.Context(), p.FileName(), p, limit)
			var tooBig *http.MaxBytesError
			switch {
			case err == nil:
			case errors.Is(err, chat.ErrAttachmentTooLarge) && limit == maxFile:
				fail(http.StatusRequestEntityTooLarge, "file %q is over the %s limit of one file (%s); nothing was stored",
					p.FileName(), sizeText(maxFile), flagUploadMaxFile)
				return
			case errors.Is(err, chat.ErrAttachmentTooLarge), errors.As(err, &tooBig):
				fail(http.StatusRequestEntityTooLarge, "the message's files are over the %s limit of one message's files together (%s); nothing was stored",
					sizeText(maxMessage), flagUploadMaxMessage)
				return
			case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
				fail(http.StatusInsufficientStorage, "the uploads of chat %s are full (their size and file count are bounded by --shared-quota and --shared-inodes); nothing was stored", key)
				return
			case errors.Is(err, plugin.ErrPathRefused):
				fail(http.StatusBadRequest, "file %q: %v", p.FileName(), err)
				return
			case r.Context().Err() != nil:
				fail(http.StatusBadRequest, "the request ended while file %q was sent", p.FileName())
				return
			default:
				fail(http.StatusInternalServerError, "store file %q: %v", p.FileName(), err)
				return
			}
		case "user_id", "user_name", "text":
			if _, dup := fields[field]; dup {
				fail(http.StatusBadRequest, "field %s is given twice", field)
				return
			}
			v, err := io.ReadAll(io.LimitReader(p, chat.MaxTextBytes+1))
			if err != nil {
				fail(http.StatusBadRequest, "field %s: %v", field, err)
				return
			}
			if len(v) > chat.MaxTextBytes {
				fail(http.StatusBadRequest, "field %s is over %d bytes, the limit of a message's text", field, chat.MaxTextBytes)
				return
			}
			fields[field] = string(v)
		default:
			fail(http.StatusBadRequest, "unknown part %q: send the fields user_id, user_name and text and \"file\" parts", field)
			return
		}
	}
	uid, ok := s.poster(w, r, key, fields["user_id"])
	if !ok {
		up.Discard() // poster answered
		return
	}
	m, err := s.agent.Post(r.Context(), agent.Incoming{ChatKey: key, UserID: uid, UserName: fields["user_name"],
		Text: fields["text"], Upload: up}) // Post removes the files when it stores no message
	s.answerPost(w, m, err)
}

// answerPost writes the answer to a posted message: 202 with the message,
// 200 with "dropped" when a plugin's hook dropped it, 503 when no model or
// a shutdown keeps it from an answer, or the database cannot be reached,
// 507 when the disk is full, 400 for what was wrong with it.
func (s *Server) answerPost(w http.ResponseWriter, m chat.Message, err error) {
	switch {
	case errors.Is(err, agent.ErrDropped):
		writeJSON(w, http.StatusOK, map[string]any{"message": nil, "dropped": err.Error()})
	case errors.Is(err, agent.ErrClosed), s.agent.ModelError() != nil && errors.Is(err, s.agent.ModelError()):
		writeError(w, http.StatusServiceUnavailable, "%v", err)
	case err != nil:
		s.writeFailure(w, http.StatusBadRequest, err)
	default:
		writeJSON(w, http.StatusAccepted, map[string]any{"message": m})
	}
}

// sizeText writes n bytes as the flags take them: 32MiB, 1500 bytes.
func sizeText(n int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.m && n%u.m == 0 {
			return fmt.Sprintf("%d%s", n/u.m, u.s)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
