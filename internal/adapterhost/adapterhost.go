// Package adapterhost runs chat platform adapters (package adapter) inside
// `nekro serve`: it does, once for every platform, what the adapter
// contract promises. Incoming messages: their files are downloaded
// through the guarded downloader (the adapter's FileHosts are the only
// private addresses allowed) into the chat's uploads, and the message is
// posted to the agent, quiet when the adapter says it asks for no answer.
// Outgoing: every assistant message of a platform's chats (a chat key
// starting "<platform>-") waits in the database's outbox (package chat),
// whichever replica wrote it; a worker per adapter claims its platform's
// deliveries while the adapter holds a connection, hands each to the
// adapter's Send, and retries a bounded number of times with backoff
// before it logs the message as not delivered. Delivery never holds up a
// turn, and a replica that dies mid-send leaves its deliveries to the
// next holder of the platform once their leases run out.
package adapterhost

import (
	"bytes"
	"context"
	"encoding/json"
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
	// sendAttempts bounds the claims of one delivery: Send failures and
	// senders that died mid-send alike.
	sendAttempts = 5
	sendTimeout  = 2 * time.Minute
	maxFileBytes = chat.MaxAttachmentBytes
	// claimBatch is how many deliveries (one per chat) a worker claims at
	// a time.
	claimBatch = 16
	// pollEvery is how often an idle worker looks at the outbox, for
	// retries that came due, deliveries whose sender died, and
	// announcements it missed.
	pollEvery = time.Second
	// MaxDeliveryAge is how long an answer waits for a replica holding
	// its platform's connection: older ones are dropped, not sent late.
	MaxDeliveryAge = 15 * time.Minute
	expireEvery    = time.Minute
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
	wake     chan struct{} // a delivery of the platform may wait: claim
	closing  chan struct{}
	failing  bool // the outbox could not be read: logged once until it can
}

// Start runs adapters: each one's Run in a goroutine, and a delivery
// worker for each, sending its platform's deliveries from chats' outbox
// (chats must record them: chat.Service.SetOutbox). Call Close to stop
// them.
func Start(adapters []adapter.Adapter, ag *agent.Agent, chats *chat.Service, layout files.Layout, allowPrivate bool, log *slog.Logger) *Set {
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Set{agent: ag, chats: chats, layout: layout, log: log, cancel: cancel}
	for _, a := range adapters {
		info := a.Info()
		e := &entry{s: s, a: a, platform: info.Platform, wake: make(chan struct{}, 1), closing: make(chan struct{}),
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
		chats.OnDelivery(s.route)
		s.runs.Add(1)
		go func() { defer s.runs.Done(); s.expire(ctx) }()
	}
	return s
}

// Query asks the adapter of q.ChatKey's platform a read-only question
// for that chat (adapter.Querier): Python plugins' OneBot get_bot and
// adapter self info. It fails when the chat is no platform's, when that
// platform's adapter does not run in this process, or when it answers no
// queries.
func (s *Set) Query(ctx context.Context, q adapter.Query) (json.RawMessage, error) {
	platform, _, ok := adapter.SplitChatKey(q.ChatKey)
	if !ok {
		return nil, fmt.Errorf("chat %s is not a chat of a platform", q.ChatKey)
	}
	for _, en := range s.entries {
		if en.platform != platform {
			continue
		}
		qr, ok := en.a.(adapter.Querier)
		if !ok {
			return nil, fmt.Errorf("the %s adapter answers no queries of plugins", platform)
		}
		return qr.Query(ctx, q)
	}
	return nil, fmt.Errorf("no %s adapter runs in this nekro process", platform)
}

// route wakes the delivery worker of platform. It runs where a delivery
// was recorded or announced: it never blocks.
func (s *Set) route(platform string) {
	for _, en := range s.entries {
		if en.platform == platform {
			select {
			case en.wake <- struct{}{}:
			default: // already woken
			}
		}
	}
}

// expire drops, every so often, the deliveries that waited too long for
// a replica holding their platform.
func (s *Set) expire(ctx context.Context) {
	t := time.NewTicker(expireEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := s.chats.ExpireDeliveries(ctx, MaxDeliveryAge); err != nil {
			s.log.Debug("expire chat platform deliveries", "err", err)
		} else if n > 0 {
			s.log.Error("chat platform messages were not delivered: no replica held their platform's connection in time",
				"messages", n, "waited", MaxDeliveryAge)
		}
	}
}

// deliver sends the platform's deliveries as they come, until the Set
// closes and none is left that this replica can send.
func (e *entry) deliver(ctx context.Context) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	e.flush(ctx, false)
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.closing:
			e.flush(ctx, false)
			return
		case <-e.wake:
			e.flush(ctx, false)
		case <-t.C:
			e.flush(ctx, true)
		}
	}
}

// holds reports whether the adapter can send now: one of its connections
// is up (or it keeps none, sending by request).
func (e *entry) holds() bool {
	st := e.a.Status()
	if len(st) == 0 {
		return true
	}
	for _, c := range st {
		if c.Connected {
			return true
		}
	}
	return false
}

// flush claims and sends the platform's deliveries until none is left to
// claim; idle, it first looks without writing.
func (e *entry) flush(ctx context.Context, idle bool) {
	for ctx.Err() == nil && e.holds() {
		if idle {
			ok, err := e.s.chats.DeliveriesWaiting(ctx, e.platform)
			if !e.outboxOK(err) || !ok {
				return
			}
			idle = false
		}
		ds, err := e.s.chats.ClaimDeliveries(ctx, e.platform, claimBatch)
		if !e.outboxOK(err) || len(ds) == 0 {
			return
		}
		for _, d := range ds {
			e.send(ctx, d)
		}
	}
}

// outboxOK logs an outbox failure once until it is over.
func (e *entry) outboxOK(err error) bool {
	if err != nil {
		if !e.failing {
			e.s.log.Warn("the chat platform outbox cannot be read; retrying", "platform", e.platform, "err", err)
		}
		e.failing = true
		return false
	}
	if e.failing {
		e.s.log.Info("the chat platform outbox can be read again", "platform", e.platform)
		e.failing = false
	}
	return true
}

// send hands one claimed delivery to the adapter, renewing its lease
// meanwhile, and records how it went.
func (e *entry) send(ctx context.Context, d chat.Delivery) {
	m := d.Message
	log := e.s.log.With("platform", e.platform, "chat", m.ChatKey, "message", m.ID)
	if d.Attempts > sendAttempts { // its senders kept dying mid-send
		log.Error("message not delivered to the chat platform", "attempts", d.Attempts-1, "err", "every sender stopped mid-send")
		e.s.chats.DropDelivery(ctx, m.ID)
		return
	}
	out := adapter.Outgoing{ChatKey: m.ChatKey, Text: m.Text}
	if len(m.Attachments) > 0 {
		// Written on another replica: copied here first.
		if _, err := e.s.chats.SyncUploads(ctx, m.ChatKey); err != nil {
			log.Warn("the message's files could not be copied from the database", "err", err)
		}
	}
	for _, att := range m.Attachments {
		out.Files = append(out.Files, adapter.OutFile{Name: att.Name, Kind: att.Kind, MIME: att.MIME, Size: att.Size,
			Open: func() (io.ReadCloser, error) { return e.s.openUpload(m.ChatKey, att.Name) }})
	}
	sctx, cancel := context.WithTimeout(ctx, sendTimeout)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(e.s.chats.LeaseTTL() / 4)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
			if ok, err := e.s.chats.RenewDelivery(sctx, m.ID); err == nil && !ok {
				log.Warn("a delivery's lease ran out while it was being sent; it may be sent twice")
				return
			}
		}
	}()
	err := e.a.Send(sctx, out)
	cancel()
	<-renewed
	if err == nil {
		e.settle(ctx, log, func(ctx context.Context) error { return e.s.chats.Delivered(ctx, m.ID) })
		return
	}
	if ctx.Err() != nil { // stopping: handed back for the next holder, at once
		e.settle(ctx, log, func(ctx context.Context) error { return e.s.chats.RetryDelivery(ctx, m.ID, 0, err.Error()) })
		return
	}
	if d.Attempts >= sendAttempts {
		log.Error("message not delivered to the chat platform", "attempts", d.Attempts, "err", err)
		e.s.chats.DropDelivery(ctx, m.ID)
		return
	}
	backoff := time.Second << (d.Attempts - 1)
	log.Warn("delivery to the chat platform failed; retrying", "in", backoff, "err", err)
	e.settle(ctx, log, func(ctx context.Context) error { return e.s.chats.RetryDelivery(ctx, m.ID, backoff, err.Error()) })
}

// settle records a delivery's outcome, retrying a while when the
// database fails: a sent message whose row stays would be sent again
// once its lease runs out.
func (e *entry) settle(ctx context.Context, log *slog.Logger, f func(context.Context) error) {
	wait := 100 * time.Millisecond
	for deadline := time.Now().Add(e.s.chats.LeaseTTL()); ; {
		err := f(context.WithoutCancel(ctx))
		if err == nil {
			return
		}
		if errors.Is(err, chat.ErrDeliveryLost) || time.Now().After(deadline) {
			log.Warn("a delivery's outcome was not recorded; it may be sent twice", "err", err)
			return
		}
		time.Sleep(wait)
		wait = min(wait*2, 2*time.Second)
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

// Close lets the deliveries this replica can send go out until ctx
// ends, then stops the adapters. Deliveries left in the outbox are sent
// by the next replica to hold their platform.
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
		err = fmt.Errorf("chat platform messages still being sent at the deadline are left to the next start: %w", ctx.Err())
	}
	s.cancel()
	s.runs.Wait()
	<-done
	return err
}
