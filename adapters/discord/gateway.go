package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/nekro-go/nekro/adapter"
)

// Gateway opcodes (Discord developer documentation, Topics, Opcodes and
// Status Codes).
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

// Gateway intents: GUILD_MESSAGES, DIRECT_MESSAGES and the privileged
// MESSAGE_CONTENT, without which guild messages arrive with no text.
const intents = 1<<9 | 1<<12 | 1<<15

// gatewayVersion is the Gateway's API version, asked for in its URL.
const gatewayVersion = "10"

// payload is a Gateway message.
type payload struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s,omitempty"`
	T  string          `json:"t,omitempty"`
}

// dropped is why a connection ended and what the next attempt should do.
type dropped struct {
	err     error
	ready   bool          // the session was up (READY or RESUMED) before it ended
	refused bool          // the token or intents were refused: retry slowly
	wait    time.Duration // wait at least this before the next attempt
}

// errNoACK is why a connection whose heartbeat went unacknowledged is
// dropped.
var errNoACK = errors.New("no heartbeat ACK before the next heartbeat was due (a dead connection)")

// closeCodes are the Gateway's close codes that a reconnection cannot
// fix, with what to change; and those that need a new session.
var (
	refusedCodes = map[websocket.StatusCode]string{
		4004: "authentication failed (close code 4004): the bot token is wrong; set --discord-token (NEKRO_DISCORD_TOKEN) to the token of the Developer Portal's Bot page",
		4010: "invalid shard (close code 4010)",
		4011: "sharding required (close code 4011): the bot is in too many guilds for one connection, and nekro does not shard",
		4012: "invalid API version (close code 4012)",
		4013: "invalid intents (close code 4013)",
		4014: "disallowed intents (close code 4014): enable MESSAGE CONTENT INTENT under Privileged Gateway Intents on the Developer Portal's Bot page",
	}
	newSessionCodes = map[websocket.StatusCode]bool{4003: true, 4007: true, 4009: true}
)

// connect runs one Gateway connection: a new session (GET /gateway/bot,
// IDENTIFY) or the resumption of the last one, until it drops.
func (a *Adapter) connect(ctx context.Context, h adapter.Host, events chan<- messageCreate) dropped {
	a.mu.Lock()
	sess := a.sess
	a.mu.Unlock()
	resuming := sess.id != "" && sess.resumeURL != ""
	base := sess.resumeURL
	if !resuming {
		gb, err := a.api.gatewayBot(ctx)
		if errors.Is(err, errUnauthorized) {
			return dropped{err: err, refused: true}
		}
		if err != nil {
			return dropped{err: err}
		}
		if l := gb.SessionStartLimit; l.Remaining <= 0 && l.Total > 0 {
			return dropped{err: fmt.Errorf("no session starts left today (%d a day); the next in %dms", l.Total, l.ResetAfter),
				wait: time.Duration(l.ResetAfter) * time.Millisecond}
		}
		base = gb.URL
	}
	gw, err := gatewayURL(base)
	if err != nil {
		a.forgetSession()
		return dropped{err: err}
	}
	a.setStatus(func(s *adapter.Status) { s.Remote = gw })

	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	ws, _, err := websocket.Dial(dctx, gw, nil)
	cancel()
	if err != nil {
		if resuming {
			a.mu.Lock()
			a.resumeFails++
			if a.resumeFails >= maxResumeDials {
				// The next attempt starts a new session at the URL GET
				// /gateway/bot names: a network blip keeps the session, a
				// resume URL that stopped answering does not keep nekro off.
				a.sess, a.resumeFails = session{}, 0
			}
			a.mu.Unlock()
		}
		return dropped{err: fmt.Errorf("dial the gateway %s: %w", gw, err)}
	}
	a.mu.Lock()
	a.resumeFails = 0
	a.mu.Unlock()
	defer ws.CloseNow()
	ws.SetReadLimit(maxFrame)

	cctx, drop := context.WithCancelCause(ctx)
	defer drop(nil)
	c := &gwConn{a: a, h: h, ws: ws, ctx: cctx}

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
	go c.heartbeat(time.Duration(hd.Interval)*time.Millisecond, drop)

	if resuming {
		err = c.send(opResume, map[string]any{"token": a.cfg.Token, "session_id": sess.id, "seq": sess.seq})
	} else {
		err = c.send(opIdentify, map[string]any{"token": a.cfg.Token, "intents": intents,
			"properties": map[string]string{"os": runtime.GOOS, "browser": "nekro", "device": "nekro"}})
	}
	if err != nil {
		return c.ended(err, false)
	}

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
				h.Log().Info("Discord gateway session resumed", "gateway", gw)
			case "MESSAGE_CREATE":
				var m messageCreate
				if err := json.Unmarshal(p.D, &m); err != nil {
					h.Log().Warn("Discord: a MESSAGE_CREATE that does not fit the documentation was ignored", "err", err)
					continue
				}
				select {
				case events <- m:
				default:
					h.Log().Warn("Discord: messages arrive faster than they are stored; one was dropped", "channel", m.ChannelID)
				}
			}
		case opHeartbeat: // the gateway asks for one now
			if err := c.beat(); err != nil {
				return c.ended(err, ready)
			}
		case opHeartbeatACK:
			c.acked.Store(true)
		case opReconnect:
			ws.Close(4000, "reconnecting as asked") // not 1000: the session stays resumable
			return dropped{err: errors.New("the gateway asked to reconnect (op 7)"), ready: ready}
		case opInvalidSession:
			var resumable bool
			json.Unmarshal(p.D, &resumable)
			if !resumable {
				a.forgetSession()
			}
			ws.Close(4000, "invalid session")
			// The documentation asks for a random 1-5 s wait before the
			// next IDENTIFY.
			return dropped{err: fmt.Errorf("the gateway invalidated the session (op 9, resumable %v)", resumable), ready: ready,
				wait: time.Second + rand.N(4*time.Second)}
		}
	}
}

// ready takes READY: the session to resume later and the bot's identity.
func (a *Adapter) ready(h adapter.Host, d json.RawMessage, gw string) error {
	var r struct {
		SessionID string `json:"session_id"`
		ResumeURL string `json:"resume_gateway_url"`
		User      user   `json:"user"`
	}
	if err := json.Unmarshal(d, &r); err != nil || r.SessionID == "" || r.User.ID == "" {
		return fmt.Errorf("READY without a session or user: %v", err)
	}
	var names []string
	for _, n := range []string{r.User.GlobalName, r.User.Username} {
		if n != "" {
			names = append(names, n)
		}
	}
	a.mu.Lock()
	a.sess.id, a.sess.resumeURL = r.SessionID, r.ResumeURL
	a.self = botUser{id: r.User.ID, names: names}
	a.reported = ""
	a.status.Connected, a.status.SelfID, a.status.Since, a.status.LastError = true, r.User.ID, time.Now().UTC(), ""
	a.mu.Unlock()
	h.Log().Info("Discord gateway connected", "bot", r.User.name(), "self_id", r.User.ID, "gateway", gw)
	return nil
}

func (a *Adapter) forgetSession() {
	a.mu.Lock()
	a.sess = session{}
	a.mu.Unlock()
}

// gatewayURL is base with the version and encoding the documentation
// asks to name.
func gatewayURL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "wss" && u.Scheme != "ws") || u.Host == "" {
		return "", fmt.Errorf("the gateway URL %q is not a ws:// or wss:// URL", base)
	}
	if u.Path == "" {
		u.Path = "/"
	}
	q := u.Query()
	q.Set("v", gatewayVersion)
	q.Set("encoding", "json")
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// gwConn is one Gateway WebSocket.
type gwConn struct {
	a     *Adapter
	h     adapter.Host
	ws    *websocket.Conn
	ctx   context.Context // cancelled, with a cause, to drop the connection
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
	seq := c.a.sess.seq // sequences start at 1
	c.a.mu.Unlock()
	if seq == 0 {
		return c.send(opHeartbeat, nil)
	}
	return c.send(opHeartbeat, seq)
}

// heartbeat beats every interval, the first after a random part of it,
// and drops the connection when a beat was not acknowledged by the next.
func (c *gwConn) heartbeat(interval time.Duration, drop context.CancelCauseFunc) {
	wait := time.Duration(rand.Float64() * float64(interval))
	c.acked.Store(true)
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = interval
		if !c.acked.Swap(false) {
			c.h.Log().Warn("Discord: a heartbeat was not acknowledged; dropping the connection to resume", "interval", interval)
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
		return dropped{err: errors.New("Discord gateway: " + why), refused: true}
	}
	if newSessionCodes[code] {
		c.a.forgetSession()
		return dropped{err: fmt.Errorf("the gateway closed the session (close code %d); starting a new one", code), ready: ready}
	}
	if code == 4008 { // rate limited: too many payloads sent
		return dropped{err: fmt.Errorf("the gateway rate-limited the connection (close code 4008)"), ready: ready, wait: 10 * time.Second}
	}
	if code != -1 {
		return dropped{err: fmt.Errorf("the gateway closed the connection (code %d): %w", code, err), ready: ready}
	}
	return dropped{err: err, ready: ready}
}
