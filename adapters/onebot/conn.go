package onebot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/nekro-go/nekro/adapter"
)

// conn is one Universal connection: events come in, actions go out and
// their responses come back on it, matched by echo.
type conn struct {
	a    *Adapter
	h    adapter.Host
	ws   *websocket.Conn
	mode string
	key  string // statuses key

	mu       sync.Mutex
	selfID   string
	nickname string
	pending  map[string]chan response

	lastSeen  atomic.Int64 // unix nanos of the last frame read
	heartbeat atomic.Int64 // the implementation's heartbeat interval, ms (0: none announced)
	closed    chan struct{}
}

type response struct {
	Status  string          `json:"status"`
	Retcode int             `json:"retcode"`
	Data    json.RawMessage `json:"data"`
	Message string          `json:"message"`
	Wording string          `json:"wording"`
}

// frame is what tells the frames the connection reads apart: an event
// (post_type set) or an action's response (echo set).
type frame struct {
	PostType string          `json:"post_type"`
	Echo     json.RawMessage `json:"echo"`
}

// serveConn runs one connection until it drops or ctx ends.
func (a *Adapter) serveConn(ctx context.Context, h adapter.Host, ws *websocket.Conn, mode, selfID, remote string) {
	ws.SetReadLimit(maxFrame)
	c := &conn{a: a, h: h, ws: ws, mode: mode, selfID: selfID, pending: map[string]chan response{}, closed: make(chan struct{})}
	c.key = mode
	if mode == "reverse" {
		c.key = "reverse/" + selfID
		if selfID == "" {
			c.key = "reverse/" + remote
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.mu.Lock()
	a.conns[c] = struct{}{}
	if mode == "reverse" {
		delete(a.statuses, "reverse") // the placeholder: a connection stands for itself now
	}
	a.mu.Unlock()
	a.setStatus(c.key, func(s *adapter.Status) {
		s.Mode, s.Connected, s.SelfID, s.Since, s.Remote = mode, true, selfID, time.Now().UTC(), remote
	})
	h.Log().Info("OneBot implementation connected", "mode", mode, "self_id", selfID, "remote", remote)
	c.lastSeen.Store(time.Now().UnixNano())

	events := make(chan event, 256)
	var wg sync.WaitGroup
	wg.Add(2)
	// Events wait for the bot's identity (at most the action timeout):
	// a message's @ of the bot is written with the bot's nickname.
	go func() { defer wg.Done(); c.identify(ctx); c.handleEvents(ctx, events) }()
	go func() { defer wg.Done(); c.watchdog(ctx, cancel) }()

	err := c.readLoop(ctx, events)
	cancel()
	close(c.closed)
	close(events)
	ws.CloseNow()
	wg.Wait()

	// An implementation that reconnects at once may be connected again
	// (under the same status key) before this read loop has ended: its
	// status then stays connected, or the outbox, which sends only
	// while a connection is up, would hold every answer back.
	a.mu.Lock()
	delete(a.conns, c)
	replaced := false
	for o := range a.conns {
		replaced = replaced || o.key == c.key
	}
	a.mu.Unlock()
	reason := "closed"
	if err != nil {
		reason = err.Error()
	}
	if !replaced {
		a.setStatus(c.key, func(s *adapter.Status) { s.Connected, s.Since, s.LastError = false, time.Now().UTC(), reason })
	}
	h.Log().Info("OneBot connection dropped", "mode", mode, "self_id", c.self(), "reason", reason, "replaced", replaced)
}

func (c *conn) self() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.selfID
}

func (c *conn) botNames() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nickname == "" {
		return nil
	}
	return []string{c.nickname}
}

func (c *conn) setSelf(id string) {
	if id == "" {
		return
	}
	c.mu.Lock()
	changed := c.selfID != id
	c.selfID = id
	c.mu.Unlock()
	if changed {
		c.a.setStatus(c.key, func(s *adapter.Status) { s.SelfID = id })
	}
}

// identify asks who the bot is (get_login_info): its id and nickname.
func (c *conn) identify(ctx context.Context) {
	data, err := c.call(ctx, "get_login_info", map[string]any{})
	if err != nil {
		c.h.Log().Warn("OneBot get_login_info failed; the bot's id comes from its events", "err", err)
		return
	}
	var info struct {
		UserID   id     `json:"user_id"`
		Nickname string `json:"nickname"`
	}
	if json.Unmarshal(data, &info) == nil {
		c.setSelf(string(info.UserID))
		c.mu.Lock()
		c.nickname = info.Nickname
		c.mu.Unlock()
	}
}

func (c *conn) readLoop(ctx context.Context, events chan<- event) error {
	for {
		_, b, err := c.ws.Read(ctx)
		if err != nil {
			return err
		}
		c.lastSeen.Store(time.Now().UnixNano())
		var f frame
		if err := json.Unmarshal(b, &f); err != nil {
			c.h.Log().Warn("OneBot: a frame that is not JSON was ignored", "err", err)
			continue
		}
		if f.PostType == "" && len(f.Echo) > 0 {
			var echo string
			var r response
			if json.Unmarshal(f.Echo, &echo) == nil && json.Unmarshal(b, &r) == nil {
				c.mu.Lock()
				ch := c.pending[echo]
				delete(c.pending, echo)
				c.mu.Unlock()
				if ch != nil {
					ch <- r
				}
			}
			continue
		}
		if f.PostType == "" {
			continue
		}
		var e event
		if err := json.Unmarshal(b, &e); err != nil {
			c.h.Log().Warn("OneBot: an event that does not fit the specification was ignored", "err", err)
			continue
		}
		e.PostType = f.PostType
		c.setSelf(string(e.SelfID))
		if e.PostType == "meta_event" {
			if e.Interval > 0 {
				c.heartbeat.Store(e.Interval)
			}
			continue
		}
		select {
		case events <- e:
		default:
			c.h.Log().Warn("OneBot: events arrive faster than they are stored; one was dropped")
		}
	}
}

// watchdog drops a connection that went silent: no frame for three
// heartbeat intervals, or no answer to a ping.
func (c *conn) watchdog(ctx context.Context, drop context.CancelFunc) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	lastPing := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if hb := time.Duration(c.heartbeat.Load()) * time.Millisecond; hb > 0 {
			if time.Since(time.Unix(0, c.lastSeen.Load())) > 3*hb {
				c.h.Log().Warn("OneBot: no heartbeat for three intervals; dropping the connection", "interval", hb)
				drop()
				return
			}
		}
		if time.Since(lastPing) >= pingEvery {
			lastPing = time.Now()
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := c.ws.Ping(pctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				c.h.Log().Warn("OneBot: the connection did not answer a ping; dropping it", "err", err)
				drop()
				return
			}
		}
	}
}

// call sends an action and waits for its response, at most ActionTimeout.
func (c *conn) call(ctx context.Context, action string, params any) (json.RawMessage, error) {
	c.a.mu.Lock()
	c.a.seq++
	echo := "nekro-" + strconv.FormatInt(c.a.seq, 10)
	c.a.mu.Unlock()
	ch := make(chan response, 1)
	c.mu.Lock()
	c.pending[echo] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, echo)
		c.mu.Unlock()
	}()
	b, err := json.Marshal(map[string]any{"action": action, "params": params, "echo": echo})
	if err != nil {
		return nil, fmt.Errorf("OneBot %s: %w", action, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.a.cfg.ActionTimeout)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, b); err != nil {
		return nil, fmt.Errorf("OneBot %s: send: %w", action, err)
	}
	select {
	case r := <-ch:
		if r.Status != "ok" && r.Status != "async" {
			why := r.Wording
			if why == "" {
				why = r.Message
			}
			return nil, fmt.Errorf("OneBot %s failed: status %q, retcode %d %s", action, r.Status, r.Retcode, why)
		}
		return r.Data, nil
	case <-c.closed:
		return nil, fmt.Errorf("OneBot %s: the connection dropped before the answer", action)
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("OneBot %s: no answer within %s (--onebot-action-timeout): %w", action, c.a.cfg.ActionTimeout, context.DeadlineExceeded)
		}
		return nil, ctx.Err()
	}
}
