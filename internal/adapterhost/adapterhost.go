// Package adapterhost runs chat platform adapters (package adapter) inside
// `nekro serve`: it does, once for every platform, what the adapter
// contract promises. Incoming messages: their files are downloaded
// through the guarded downloader (the adapter's FileHosts are the only
// private addresses allowed) into the chat's uploads, and the message is
// posted to the agent, quiet when the adapter says it asks for no answer.
// Outgoing: every assistant message of a platform's chats (a chat key
// starting "<platform>-") is queued and handed to the adapter's Send by a
// worker of its own, retried a bounded number of times with backoff and
// then logged, so delivery never holds up a turn.
package adapterhost

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/nekro-go/nekro/adapter"
	"github.com/nekro-go/nekro/internal/agent"
	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/files"
)

// Delivery tuning.
const (
	queueSize    = 1024
	sendAttempts = 3
	sendTimeout  = 2 * time.Minute
	maxFileBytes = chat.MaxAttachmentBytes
)

// Settings are the registered platforms' flags, bound to a command.
type Settings struct {
	opens []func() (adapter.Adapter, error)
}

// Bind declares every registered platform's settings on fs.
func Bind(fs *pflag.FlagSet) *Settings {
	s := &Settings{}
	for _, d := range adapter.Drivers() {
		gfs := flag.NewFlagSet(d.Platform, flag.ContinueOnError)
		s.opens = append(s.opens, d.Configure(gfs))
		fs.AddGoFlagSet(gfs)
	}
	return s
}

// Open builds the adapters the parsed settings turn on.
func (s *Settings) Open() ([]adapter.Adapter, error) {
	if s == nil {
		return nil, nil
	}
	var out []adapter.Adapter
	for _, open := range s.opens {
		a, err := open()
		if err != nil {
			return nil, err
		}
		if a != nil {
			out = append(out, a)
		}
	}
	return out, nil
}

// Set is the running adapters of one nekro serve.
type Set struct {
	agent  *agent.Agent
	chats  *chat.Service
	layout files.Layout
	log    *slog.Logger

	entries []*entry
	cancel  context.CancelFunc
	runs    sync.WaitGroup
	workers sync.WaitGroup
}

type entry struct {
	s        *Set
	a        adapter.Adapter
	platform string
	dl       *files.Downloader
	queue    chan chat.Message
	closing  chan struct{}
}

// Start runs adapters: each one's Run in a goroutine, and a delivery
// worker for each. Call Close to stop them.
func Start(adapters []adapter.Adapter, ag *agent.Agent, chats *chat.Service, layout files.Layout, allowPrivate bool, log *slog.Logger) *Set {
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Set{agent: ag, chats: chats, layout: layout, log: log, cancel: cancel}
	for _, a := range adapters {
		info := a.Info()
		e := &entry{s: s, a: a, platform: info.Platform, queue: make(chan chat.Message, queueSize), closing: make(chan struct{}),
			dl: files.NewDownloader(files.Options{AllowPrivateNetworks: allowPrivate, AllowHosts: info.FileHosts})}
		s.entries = append(s.entries, e)
		s.runs.Add(1)
		go func() {
			defer s.runs.Done()
			if err := a.Run(ctx, e); err != nil {
				log.Error("chat platform adapter stopped", "platform", e.platform, "err", err)
			}
		}()
		s.workers.Add(1)
		go func() { defer s.workers.Done(); e.deliver(ctx) }()
		log.Info("chat platform adapter started", "platform", info.Platform, "settings", info.Settings)
	}
	if len(s.entries) > 0 {
		chats.OnEvent(s.route)
	}
	return s
}

// route queues an assistant message for its platform's adapter. It runs
// where the message was stored: it never blocks.
func (s *Set) route(e chat.Event) {
	if e.Type != chat.EventMessage || e.Message == nil || e.Message.Role != chat.Assistant {
		return
	}
	platform, _, ok := adapter.SplitChatKey(e.Message.ChatKey)
	if !ok {
		return
	}
	for _, en := range s.entries {
		if en.platform != platform {
			continue
		}
		select {
		case en.queue <- *e.Message:
		default:
			s.log.Error("chat platform delivery queue full; a message was not delivered", "platform", platform, "chat", e.Message.ChatKey)
		}
	}
}

// deliver sends queued messages until the Set closes and the queue is
// empty.
func (e *entry) deliver(ctx context.Context) {
	for {
		select {
		case m := <-e.queue:
			e.send(ctx, m)
		case <-e.closing:
			for {
				select {
				case m := <-e.queue:
					e.send(ctx, m)
				default:
					return
				}
			}
		}
	}
}

func (e *entry) send(ctx context.Context, m chat.Message) {
	out := adapter.Outgoing{ChatKey: m.ChatKey, Text: m.Text}
	for _, att := range m.Attachments {
		out.Files = append(out.Files, adapter.OutFile{Name: att.Name, Kind: att.Kind, MIME: att.MIME, Size: att.Size,
			Open: func() (io.ReadCloser, error) { return e.s.openUpload(m.ChatKey, att.Name) }})
	}
	backoff := time.Second
	for attempt := 1; ; attempt++ {
		sctx, cancel := context.WithTimeout(ctx, sendTimeout)
		err := e.a.Send(sctx, out)
		cancel()
		if err == nil {
			return
		}
		if attempt == sendAttempts || ctx.Err() != nil {
			e.s.log.Error("message not delivered to the chat platform", "platform", e.platform, "chat", m.ChatKey,
				"message", m.ID, "attempts", attempt, "err", err)
			return
		}
		e.s.log.Warn("delivery to the chat platform failed; retrying", "platform", e.platform, "chat", m.ChatKey, "in", backoff, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

func (s *Set) openUpload(chatKey, name string) (io.ReadCloser, error) {
	dir, err := s.layout.EnsureUploadsDir(chatKey)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return root.Open(name)
}

// Log is nekro's log.
func (e *entry) Log() *slog.Logger { return e.s.log.With("platform", e.platform) }

// Receive stores a platform's message: its files first, then the message
// through the agent (quiet unless m.Trigger).
func (e *entry) Receive(ctx context.Context, m adapter.Message) error {
	if p, _, ok := adapter.SplitChatKey(m.ChatKey); !ok || p != e.platform {
		return fmt.Errorf("chat key %q is not one of %s's (want %s-<channel>)", m.ChatKey, e.platform, e.platform)
	}
	in := agent.Incoming{ChatKey: m.ChatKey, UserID: m.UserID, UserName: m.UserName, Text: m.Text, Admin: m.Admin, Quiet: !m.Trigger}
	var failed []string
	if len(m.Files) > 0 {
		up := e.s.chats.NewUpload(m.ChatKey)
		for _, f := range m.Files {
			if err := e.fetch(ctx, up, f); err != nil {
				e.Log().Warn("a user's file was not fetched", "chat", m.ChatKey, "file", f.Name, "err", err)
				failed = append(failed, fmt.Sprintf("[%s %s could not be fetched: %v]", f.Kind, f.Name, err))
			}
		}
		if len(up.Attachments()) > 0 {
			in.Upload = up
		}
	}
	if len(failed) > 0 {
		in.Text = strings.TrimSpace(in.Text + "\n" + strings.Join(failed, "\n"))
	}
	if strings.TrimSpace(in.Text) == "" && in.Upload == nil {
		return nil // nothing a turn could read
	}
	if len(in.Text) > agent.MaxMessageBytes {
		in.Text = chat.TruncateText(in.Text)
	}
	_, err := e.s.agent.Post(ctx, in)
	if errors.Is(err, agent.ErrDropped) {
		return nil
	}
	return err
}

// fetch stores one file of a message in up.
func (e *entry) fetch(ctx context.Context, up *chat.Upload, f adapter.File) error {
	if f.Data != nil {
		_, err := up.Add(ctx, f.Name, bytes.NewReader(f.Data), maxFileBytes)
		return err
	}
	pr, pw := io.Pipe()
	go func() {
		_, _, err := e.dl.Fetch(ctx, f.URL, pw)
		pw.CloseWithError(err)
	}()
	_, err := up.Add(ctx, f.Name, pr, maxFileBytes)
	pr.CloseWithError(err) // stops the download when Add gave up early
	if err != nil && f.Secret != "" {
		err = &hiddenError{msg: strings.ReplaceAll(err.Error(), f.Secret, "xxxxx"), err: err}
	}
	return err
}

// hiddenError is an error whose text has a secret replaced; it still
// matches what it wraps (errors.Is).
type hiddenError struct {
	msg string
	err error
}

func (e *hiddenError) Error() string { return e.msg }
func (e *hiddenError) Unwrap() error { return e.err }

// Routes returns the adapters' HTTP routes, to mount on the server.
func (s *Set) Routes() map[string]http.Handler {
	out := map[string]http.Handler{}
	if s == nil {
		return out
	}
	for _, e := range s.entries {
		if r, ok := e.a.(adapter.Router); ok {
			for p, h := range r.Routes() {
				out[p] = h
			}
		}
	}
	return out
}

// Status lists every connection of every adapter.
func (s *Set) Status() []adapter.Status {
	out := []adapter.Status{}
	if s == nil {
		return out
	}
	for _, e := range s.entries {
		out = append(out, e.a.Status()...)
	}
	return out
}

// Close lets the queued messages go out until ctx ends, then stops the
// adapters.
func (s *Set) Close(ctx context.Context) error {
	if s == nil {
		return nil
	}
	for _, e := range s.entries {
		close(e.closing)
	}
	done := make(chan struct{})
	go func() { s.workers.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("chat platform messages still queued at the deadline were not delivered: %w", ctx.Err())
	}
	s.cancel()
	s.runs.Wait()
	<-done
	return err
}
