package qqbot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/nekro-go/nekro/adapter"
)

// Gateway opcodes (QQ bot documentation, 事件订阅与通知, OpCode).
const (
	opDispatch       = 0
	opHeartbeat      = 1
	opIdentify       = 2
	opResume         = 6
	opReconnect      = 7
	opInvalidSession = 9
	opHello          = 10
	opHeartbeatACK   = 11
)

// intents: GROUP_AND_C2C_EVENT, the group @-messages and private
// messages. (Guild channels are not read.)
const intents = 1 << 25

// payload is a gateway message.
type payload struct {
	ID string          `json:"id,omitempty"`
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s,omitempty"`
	T  string          `json:"t,omitempty"`
}

// dropped is why a connection ended and what the next attempt should do.
type dropped struct {
	err     error
	ready   bool          // the session was up (READY or RESUMED) before it ended
	refused bool          // the credentials or intents were refused: retry slowly
	wait    time.Duration // wait at least this before the next attempt
}

var errNoACK = errors.New("no heartbeat ACK before the next heartbeat was due (a dead connection)")

// Close codes (QQ bot documentation, websocket 错误): those no
// reconnection fixes, with what to change, and those that need a new
// session.
var (
	refusedCodes = map[websocket.StatusCode]string{
		4004: "authentication failed (close code 4004): the access token was refused; check --qqbot-app-id and NEKRO_QQBOT_SECRET",
		4010: "invalid shard (close code 4010)",
		4011: "too many guilds for one connection (close code 4011), and nekro does not shard",
		4012: "invalid version (close code 4012)",
		4013: "invalid intents (close code 4013)",
		4014: "intents not granted (close code 4014): the bot may not receive group @-messages and private messages; enable them for the bot on the QQ open platform",
		4914: "the bot is delisted and may connect only to the sandbox (close code 4914): set --qqbot-sandbox, or have the bot listed again",
		4915: "the bot is banned (close code 4915): ask the platform to lift the ban",
	}
	newSessionCodes = map[websocket.StatusCode]bool{4001: true, 4002: true, 4006: true, 4007: true}
)

// connect runs one gateway connection: a new session (IDENTIFY) or the
// resumption of the last one, until it drops.
func (a *Adapter) connect(ctx context.Context, h adapter.Host, events chan<- event) dropped {
	tok, err := a.tokens.get(ctx)
	if err != nil {
		return dropped{err: err, refused: errors.Is(err, errRefused)}
	}
	gw, err := a.api.gateway(ctx)
	if err != nil {
		return dropped{err: err, refused: errors.Is(err, errRefused)}
	}
	if u, err := url.Parse(gw); err != nil || (u.Scheme != "wss" && u.Scheme != "ws") || u.Host == "" {
		return dropped{err: fmt.Errorf("the gateway URL %q is not a ws:// or wss:// URL", gw)}
	}
	a.setStatus(func(s *adapter.Status) { s.Remote = gw })
	// The token may have been renewed while GET /gateway ran.
	if tok, err = a.tokens.get(ctx); err != nil {
		return dropped{err: err, refused: errors.Is(err, errRefused)}
	}

	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	ws, _, err := websocket.Dial(dctx, gw, nil)
	cancel()
	if err != nil {
		return dropped{err: fmt.Errorf("dial the gateway %s: %w", gw, err)}
	}
	defer ws.CloseNow()
	ws.SetReadLimit(maxFrame)

	cctx, drop := context.WithCancelCause(ctx)
	defer drop(nil)
	c := &gwConn{a: a, h: h, ws: ws, ctx: cctx, token: tok}

	hello, err := c.read(helloTimeout)
	if err != nil {
		return c.ended(err, false)
	}
	if hello.Op != opHello {
		return dropped{err: fmt.Errorf("the gateway sent op %d where HELLO (op 10) was due", hello.Op)}
	}
	var hd struct {
		Interval int64 `json:"heartbeat_interval"`
	}
	if json.Unmarshal(hello.D, &hd) != nil || hd.Interval <= 0 {
		return dropped{err: fmt.Errorf("HELLO without a heartbeat_interval: %s", hello.D)}
	}

	a.mu.Lock()
	sess := a.sess
	a.mu.Unlock()
	if sess.id != "" {
		err = c.send(opResume, map[string]any{"token": "QQBot " + tok, "session_id": sess.id, "seq": sess.seq})
	} else {
		err = c.send(opIdentify, map[string]any{"token": "QQBot " + tok, "intents": intents, "shard": []int{0, 1},
			"properties": map[string]string{"$os": "linux", "$browser": "nekro", "$device": "nekro"}})
	}
	if err != nil {
		return c.ended(err, false)
	}
	go c.heartbeat(time.Duration(hd.Interval)*time.Millisecond, drop)

	ready := false
	for {
		p, err := c.read(0)
		if err != nil {
			return c.ended(err, ready)
		}
		switch p.Op {
		case opDispatch:
			if p.S != nil {
				a.mu.Lock()
				a.sess.seq = *p.S
				a.mu.Unlock()
			}
			switch p.T {
			case "READY":
				if err := a.ready(h, p.D, gw); err != nil {
					return dropped{err: err}
				}
				ready = true
			case "RESUMED":
				ready = true
				a.setStatus(func(s *adapter.Status) { s.Connected, s.Since, s.LastError = true, time.Now().UTC(), "" })
				h.Log().Info("QQ bot gateway session resumed", "gateway", gw)
			case "GROUP_AT_MESSAGE_CREATE", "C2C_MESSAGE_CREATE":
				var m message
				if err := json.Unmarshal(p.D, &m); err != nil {
					h.Log().Warn("QQ bot: a message event that does not fit the documentation was ignored", "type", p.T, "err", err)
					continue
				}
				select {
				case events <- event{kind: p.T, m: m, at: time.Now()}:
				default:
					h.Log().Warn("QQ bot: messages arrive faster than they are stored; one was dropped", "type", p.T)
				}
			}
		case opHeartbeat: // the gateway asks for one now
			if err := c.beat(); err != nil {
				return c.ended(err, ready)
			}
		case opHeartbeatACK:
			c.acked.Store(true)
		case opReconnect:
			ws.Close(4000, "reconnecting as asked") // the session stays resumable
			return dropped{err: errors.New("the gateway asked to reconnect (op 7)"), ready: ready}
		case opInvalidSession:
			a.forgetSession()
			ws.Close(4000, "invalid session")
			return dropped{err: errors.New("the gateway invalidated the session (op 9); identifying anew"), ready: ready,
				wait: time.Second + rand.N(4*time.Second)}
		}
	}
}

// ready takes READY: the session to resume later and the bot's identity.
func (a *Adapter) ready(h adapter.Host, d json.RawMessage, gw string) error {
	var r struct {
		SessionID string `json:"session_id"`
		User      struct {
			ID       string `json:"id"`
			Username string `json:"username"`
		} `json:"user"`
	}
	if err := json.Unmarshal(d, &r); err != nil || r.SessionID == "" {
		return fmt.Errorf("READY without a session: %v", err)
	}
	a.mu.Lock()
	a.sess.id = r.SessionID
	a.reported = ""
	a.status.Connected, a.status.SelfID, a.status.Since, a.status.LastError = true, r.User.ID, time.Now().UTC(), ""
	a.mu.Unlock()
	h.Log().Info("QQ bot gateway connected", "bot", r.User.Username, "self_id", r.User.ID, "gateway", gw)
	return nil
}

func (a *Adapter) forgetSession() {
	a.mu.Lock()
	a.sess = session{}
	a.mu.Unlock()
}

// gwConn is one gateway WebSocket.
type gwConn struct {
	a     *Adapter
	h     adapter.Host
	ws    *websocket.Conn
	ctx   context.Context // cancelled, with a cause, to drop the connection
	token string          // the access token it identified or resumed with
	acked atomic.Bool
}

// read reads one payload, within timeout when it is not 0.
func (c *gwConn) read(timeout time.Duration) (payload, error) {
	ctx := c.ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	_, b, err := c.ws.Read(ctx)
	if err != nil {
		return payload{}, err
	}
	var p payload
	if err := json.Unmarshal(b, &p); err != nil {
		return payload{}, fmt.Errorf("a gateway payload that is not JSON: %w", err)
	}
	return p, nil
}

func (c *gwConn) send(op int, d any) error {
	b, err := json.Marshal(map[string]any{"op": op, "d": d})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	return c.ws.Write(ctx, websocket.MessageText, b)
}

// beat sends a heartbeat with the last sequence read (null before any).
func (c *gwConn) beat() error {
	c.a.mu.Lock()
	seq := c.a.sess.seq
	c.a.mu.Unlock()
	if seq == 0 {
		return c.send(opHeartbeat, nil)
	}
	return c.send(opHeartbeat, seq)
}

// heartbeat beats every interval and drops the connection when a beat
// was not acknowledged by the next.
func (c *gwConn) heartbeat(interval time.Duration, drop context.CancelCauseFunc) {
	c.acked.Store(true)
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(interval):
		}
		if !c.acked.Swap(false) {
			c.h.Log().Warn("QQ bot: a heartbeat was not acknowledged; dropping the connection to resume", "interval", interval)
			drop(errNoACK)
			return
		}
		if err := c.beat(); err != nil {
			drop(fmt.Errorf("send a heartbeat: %w", err))
			return
		}
	}
}

// ended says what a read or write error means for the next attempt.
func (c *gwConn) ended(err error, ready bool) dropped {
	if cause := context.Cause(c.ctx); cause != nil && c.ctx.Err() != nil && !errors.Is(cause, context.Canceled) {
		return dropped{err: cause, ready: ready}
	}
	code := websocket.CloseStatus(err)
	if why, ok := refusedCodes[code]; ok {
		c.a.forgetSession()
		if code == 4004 {
			c.a.tokens.forget(c.token) // the next attempt asks for a new one
		}
		return dropped{err: errors.New("QQ bot gateway: " + why), refused: true}
	}
	if newSessionCodes[code] || (code >= 4900 && code <= 4913) {
		c.a.forgetSession()
		return dropped{err: fmt.Errorf("the gateway closed the session (close code %d); starting a new one", code), ready: ready}
	}
	if code == 4008 { // payloads sent too fast
		return dropped{err: errors.New("the gateway rate-limited the connection (close code 4008)"), ready: ready, wait: 10 * time.Second}
	}
	if code != -1 {
		return dropped{err: fmt.Errorf("the gateway closed the connection (code %d): %w", code, err), ready: ready}
	}
	return dropped{err: err, ready: ready}
}
