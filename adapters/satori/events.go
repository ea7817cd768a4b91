package satori

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/nekro-go/nekro/adapter"
)

// Opcodes of the event stream (Protocol: Events).
const (
	opEvent    = 0
	opPing     = 1
	opPong     = 2
	opIdentify = 3
	opReady    = 4
	opMeta     = 5
)

// Login statuses; ONLINE is the one that can send.
const statusOnline = 1

// Channel types; DIRECT is a private channel.
const channelDirect = 1

// signal is one message of the event stream.
type signal struct {
	Op   int             `json:"op"`
	Body json.RawMessage `json:"body"`
}

// user is a Satori User, the parts read.
type user struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Nick  string `json:"nick"`
	IsBot bool   `json:"is_bot"`
}

func (u user) displayName() string {
	for _, n := range []string{u.Nick, u.Name, u.ID} {
		if n != "" {
			return n
		}
	}
	return "?"
}

// loginBody is a Satori Login.
type loginBody struct {
	SN       int64  `json:"sn"`
	Platform string `json:"platform"`
	User     user   `json:"user"`
	Status   *int   `json:"status"`
	Adapter  string `json:"adapter"`
	// SelfID is what servers before the Login's user field sent.
	SelfID string `json:"self_id"`
}

func (l loginBody) platform() string { return l.Platform }

func (l loginBody) selfID() string {
	if l.User.ID != "" {
		return l.User.ID
	}
	return l.SelfID
}

// isOnline says the login can send; a login without a status (events
// carry none, which the protocol says means ONLINE) is.
func (l loginBody) isOnline() bool { return l.Status == nil || *l.Status == statusOnline }

// readyBody is READY's body, the server's Meta.
type readyBody struct {
	Logins    []loginBody `json:"logins"`
	ProxyURLs []string    `json:"proxy_urls"`
}

// event is an EVENT's body.
type event struct {
	SN int64 `json:"sn"`
	// ID is what servers before the sn field (late 2024) numbered events
	// with; kept raw, so a server that someday sends a string id there
	// is not refused.
	ID       json.RawMessage `json:"id"`
	Type     string          `json:"type"`
	Login    loginBody       `json:"login"`
	Platform string          `json:"platform"` // servers before the Login field
	SelfID   string          `json:"self_id"`  // servers before the Login field
	Channel  *struct {
		ID   string `json:"id"`
		Type *int   `json:"type"`
		Name string `json:"name"`
	} `json:"channel"`
	Guild *struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"guild"`
	User   *user `json:"user"`
	Member *struct {
		Name string `json:"name"`
		Nick string `json:"nick"`
	} `json:"member"`
	Message *message `json:"message"`
}

// message is a Satori Message, the parts read.
type message struct {
	ID      string   `json:"id"`
	Content string   `json:"content"`
	User    *user    `json:"user"`
	Quote   *message `json:"quote"`
}

// seq is the event's sequence number: sn, or the older id.
func (e event) seq() int64 {
	if e.SN != 0 {
		return e.SN
	}
	n, _ := strconv.ParseInt(string(e.ID), 10, 64)
	return n
}

func (e event) platform() string {
	if e.Login.Platform != "" {
		return e.Login.Platform
	}
	return e.Platform
}

func (e event) selfID() string {
	if id := e.Login.selfID(); id != "" {
		return id
	}
	return e.SelfID
}

// dropped is why a connection ended.
type dropped struct {
	err     error
	ready   bool // READY came before it ended
	refused bool // the token was refused: retry slowly
}

// errSilent is why a connection that stopped answering is dropped.
var errSilent = errors.New("nothing from the server, not even a PONG, for three ping intervals (a dead connection)")

// dial opens the event stream and sends IDENTIFY with the token and sn
// (0: none, a new session).
func (a *Adapter) dial(ctx context.Context, sn int64) (*websocket.Conn, *dropped) {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	ws, resp, err := websocket.Dial(dctx, eventsURL(a.base, false), nil)
	if err != nil {
		if resp != nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
			return nil, &dropped{err: fmt.Errorf("%w (HTTP %d at the WebSocket upgrade of %s): %s", errRefused, resp.StatusCode,
				eventsURL(a.base, true), tokenFix), refused: true}
		}
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return nil, &dropped{err: fmt.Errorf("no event stream at %s (HTTP 404): check --satori-url, the base before /v1 "+
				"(Koishi's server-satori plugin: http://HOST:5140/satori)", eventsURL(a.base, true))}
		}
		return nil, &dropped{err: fmt.Errorf("dial %s: %w", eventsURL(a.base, true), err)}
	}
	ws.SetReadLimit(maxFrame)
	body := map[string]any{}
	if a.cfg.Token != "" {
		body["token"] = a.cfg.Token
	}
	if sn > 0 {
		body["sn"] = sn
		body["sequence"] = sn // what servers before the sn field (late 2024) read
	}
	if err := writeSignal(dctx, ws, opIdentify, body); err != nil {
		ws.CloseNow()
		return nil, &dropped{err: fmt.Errorf("send IDENTIFY: %w", err)}
	}
	return ws, nil
}

// tokenFix is what to do about a refused token.
const tokenFix = "set --satori-token (NEKRO_SATORI_TOKEN) to the token of the Satori server's settings (Koishi: the server-satori plugin's token)"

// awaitReady reads until READY, within readyTimeout.
func (a *Adapter) awaitReady(ctx context.Context, ws *websocket.Conn) (readyBody, *dropped) {
	rctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		s, err := readSignal(rctx, ws)
		if err != nil {
			if ctx.Err() == nil && rctx.Err() != nil {
				return readyBody{}, &dropped{err: fmt.Errorf("no READY within %s of IDENTIFY: is %s a Satori server's event stream?", readyTimeout, eventsURL(a.base, true))}
			}
			return readyBody{}, closed(err, false)
		}
		if s.Op != opReady {
			continue // a PONG or a META before READY
		}
		var r readyBody
		if err := json.Unmarshal(s.Body, &r); err != nil {
			return readyBody{}, &dropped{err: fmt.Errorf("a READY that does not fit the protocol: %w", err)}
		}
		return r, nil
	}
}

// handshake dials, IDENTIFYs without an sn and waits for READY, then
// closes: nekro doctor's check.
func (a *Adapter) handshake(ctx context.Context) (readyBody, error) {
	ws, d := a.dial(ctx, 0)
	if d != nil {
		return readyBody{}, d.err
	}
	defer ws.CloseNow()
	r, d := a.awaitReady(ctx, ws)
	if d != nil {
		return readyBody{}, d.err
	}
	ws.Close(websocket.StatusNormalClosure, "nekro doctor")
	return r, nil
}

// connect runs one connection of the event stream until it drops.
func (a *Adapter) connect(ctx context.Context, h adapter.Host, events chan<- event) dropped {
	sn := a.lastSN()
	ws, d := a.dial(ctx, sn)
	if d != nil {
		return *d
	}
	defer ws.CloseNow()
	ready, d := a.awaitReady(ctx, ws)
	if d != nil {
		return *d
	}
	a.ready(h, ready, sn)

	cctx, drop := context.WithCancelCause(ctx)
	defer drop(nil)
	var heard atomic.Int64 // unix nanoseconds of the last signal read
	heard.Store(time.Now().UnixNano())
	go a.ping(cctx, ws, &heard, drop)

	for {
		s, err := readSignal(cctx, ws)
		if err != nil {
			if cause := context.Cause(cctx); cctx.Err() != nil && cause != nil && !errors.Is(cause, context.Canceled) {
				return dropped{err: cause, ready: true}
			}
			return *closed(err, true)
		}
		heard.Store(time.Now().UnixNano())
		switch s.Op {
		case opEvent:
			var e event
			if err := json.Unmarshal(s.Body, &e); err != nil {
				h.Log().Warn("Satori: an event that does not fit the protocol was ignored", "err", err)
				continue
			}
			a.noteEvent(h, e)
			if e.Type != "message-created" {
				continue
			}
			select {
			case events <- e:
			default:
				h.Log().Warn("Satori: messages arrive faster than they are stored; one was dropped", "platform", e.platform())
			}
		case opMeta:
			var m struct {
				ProxyURLs []string `json:"proxy_urls"`
			}
			if json.Unmarshal(s.Body, &m) == nil && m.ProxyURLs != nil {
				a.mu.Lock()
				a.proxyURLs = m.ProxyURLs
				a.mu.Unlock()
			}
		}
	}
}

// ping sends PING every interval and drops a connection silent for three.
func (a *Adapter) ping(ctx context.Context, ws *websocket.Conn, heard *atomic.Int64, drop context.CancelCauseFunc) {
	t := time.NewTicker(a.cfg.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if time.Since(time.Unix(0, heard.Load())) > 3*a.cfg.PingInterval {
			drop(errSilent)
			return
		}
		if err := writeSignal(ctx, ws, opPing, struct{}{}); err != nil {
			drop(fmt.Errorf("send PING: %w", err))
			return
		}
	}
}

// ready takes READY: the logins and proxy routes.
func (a *Adapter) ready(h adapter.Host, r readyBody, sn int64) {
	now := time.Now().UTC()
	a.mu.Lock()
	a.reported = ""
	a.proxyURLs = r.ProxyURLs
	a.conn.Connected, a.conn.Since, a.conn.LastError = true, now, ""
	seen := map[string]bool{}
	var names []string
	for _, lb := range r.Logins {
		l := a.takeLogin(h, lb, now)
		if l == nil {
			continue
		}
		seen[loginKey(l.platform, l.selfID)] = true
		state := ""
		if !l.online {
			state = " (not online)"
		}
		names = append(names, l.platform+":"+l.selfID+state)
	}
	for k, l := range a.logins {
		if !seen[k] {
			l.online = false
		}
	}
	a.mu.Unlock()
	if len(names) == 0 {
		names = []string{"none yet"}
	}
	h.Log().Info("Satori event stream connected", "server", redact(a.base), "logins", strings.Join(names, ", "), "resumed_from_sn", sn)
}

// takeLogin records a login a READY or login event names, nil for one
// without a platform and user or of a platform not allowed. Hold a.mu.
func (a *Adapter) takeLogin(h adapter.Host, lb loginBody, now time.Time) *login {
	p, id := lb.platform(), lb.selfID()
	if p == "" || id == "" || !a.platformAllowed(p) {
		return nil
	}
	if bad := platformProblem(p); bad != "" {
		h.Log().Warn("Satori: a login of a platform whose name cannot be in a chat key is ignored", "platform", p, "why", bad)
		return nil
	}
	k := loginKey(p, id)
	l := a.logins[k]
	if l == nil {
		l = &login{platform: p, selfID: id}
		a.logins[k] = l
	}
	l.online, l.since = lb.isOnline(), now
	l.names = nil
	for _, n := range []string{lb.User.Nick, lb.User.Name} {
		if n != "" && !strings.EqualFold(n, id) {
			l.names = append(l.names, n)
		}
	}
	return l
}

// noteEvent keeps the last sn for a resume and follows login events.
func (a *Adapter) noteEvent(h adapter.Host, e event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if sn := e.seq(); sn != 0 && !strings.HasPrefix(e.Type, "login-") {
		a.sn = sn // not a maximum: a restarted server counts anew
	}
	switch e.Type {
	case "login-added", "login-updated":
		if l := a.takeLogin(h, e.Login, time.Now().UTC()); l != nil {
			h.Log().Info("Satori login "+strings.TrimPrefix(e.Type, "login-"), "platform", l.platform, "self_id", l.selfID, "online", l.online)
		}
	case "login-removed":
		if l := a.logins[loginKey(e.Login.platform(), e.Login.selfID())]; l != nil {
			l.online = false
			h.Log().Info("Satori login removed", "platform", l.platform, "self_id", l.selfID)
		}
	}
}

// closed says what a read error means for the next attempt.
func closed(err error, ready bool) *dropped {
	code := websocket.CloseStatus(err)
	var ce websocket.CloseError
	errors.As(err, &ce)
	reason := strings.ToLower(ce.Reason)
	switch {
	// 4004 "invalid token" is what Koishi's Satori server closes with.
	case code == 4004 || code >= 4000 && (strings.Contains(reason, "token") || strings.Contains(reason, "auth")):
		return &dropped{err: fmt.Errorf("%w (close code %d): %s", errRefused, code, tokenFix), refused: true}
	case code != -1:
		return &dropped{err: fmt.Errorf("the server closed the event stream (code %d): %w", code, err), ready: ready}
	}
	return &dropped{err: err, ready: ready}
}

func readSignal(ctx context.Context, ws *websocket.Conn) (signal, error) {
	_, b, err := ws.Read(ctx)
	if err != nil {
		return signal{}, err
	}
	var s signal
	if err := json.Unmarshal(b, &s); err != nil {
		return signal{}, fmt.Errorf("a signal that is not JSON: %w", err)
	}
	return s, nil
}

func writeSignal(ctx context.Context, ws *websocket.Conn, op int, body any) error {
	b, err := json.Marshal(map[string]any{"op": op, "body": body})
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return ws.Write(wctx, websocket.MessageText, b)
}
