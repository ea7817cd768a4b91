// Package onebot connects nekro to QQ (and other platforms) through a
// OneBot v11 implementation such as NapCat, written from the public
// specification (github.com/botuniverse/onebot-11).
//
// Two ways to connect, both Universal connections (events and actions on
// one WebSocket):
//
//   - reverse: the implementation connects to nekro at /onebot/v11/ws with
//     "Authorization: Bearer <token>" (or ?access_token=), X-Self-ID and
//     X-Client-Role: Universal. --onebot-token enables the endpoint; a
//     missing token is refused at the upgrade with 401, a wrong one with
//     403.
//   - forward: nekro dials --onebot-ws-url (sending the token, when set)
//     and dials again with backoff (1 s doubling to 30 s) when it drops.
//
// Chat keys are the reference's: onebot_v11-group_<group id> and
// onebot_v11-private_<user id>; user ids are onebot_v11:<QQ number>
// (that is how --super-users names them). Group messages are answered as
// adapter.ReplyRule says (mentioned, named, by chance); the others are
// stored as context. Images and files users send are fetched by nekro's
// guarded downloader; the assistant's images go out as image segments
// and its other files through upload_group_file/upload_private_file,
// both as base64:// content, so the implementation needs no access to
// nekro's disk. Actions time out after --onebot-action-timeout; a
// connection that stays silent past three heartbeat intervals, or does
// not answer a WebSocket ping, is dropped.
package onebot

import (
	"context"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/nekro-go/nekro/adapter"
)

// Platform is the OneBot v11 platform key, the prefix of its chat keys.
const Platform = "onebot_v11"

// Path is where implementations connect in reverse mode.
const Path = "/onebot/v11/ws"

// Defaults of Config.
const (
	DefaultActionTimeout = 10 * time.Second
	maxBackoff           = 30 * time.Second
	pingEvery            = 30 * time.Second
	maxFrame             = 32 << 20 // largest event or action response read
)

func init() {
	adapter.Register(adapter.Driver{Platform: Platform, Configure: configure})
}

// Config is the adapter's settings.
type Config struct {
	// Token is the access token: required of reverse connections, sent on
	// forward ones. Setting it enables the reverse endpoint.
	Token string
	// WSURL is the implementation's WebSocket for the forward mode
	// (ws://host:port/), "" for none.
	WSURL string
	// BotNames are the bot's names: a group message naming one is
	// answered (its QQ nickname counts too).
	BotNames []string
	// ReplyProbability answers any other group message by chance, 0-1.
	ReplyProbability float64
	// Groups, when not empty, are the only group ids read and answered.
	Groups []string
	// FileHosts are host:port pairs of the implementation's own file
	// server, which downloads may reach though private.
	FileHosts []string
	// ActionTimeout bounds one action (default 10 s).
	ActionTimeout time.Duration
}

func configure(fs *flag.FlagSet) func() (adapter.Adapter, error) {
	var c Config
	// A secret: never shown in --help, and a warning when given as a flag.
	adapter.SecretString(fs, &c.Token, "onebot-token", "NEKRO_ONEBOT_TOKEN", "OneBot v11 access token; enables the reverse WebSocket at "+Path)
	fs.StringVar(&c.WSURL, "onebot-ws-url", os.Getenv("NEKRO_ONEBOT_WS_URL"), "OneBot v11 forward mode: the implementation's WebSocket URL nekro dials, e.g. ws://127.0.0.1:3001 (env NEKRO_ONEBOT_WS_URL)")
	adapter.ListFlag(fs, &c.BotNames, "onebot-bot-names", "NEKRO_ONEBOT_BOT_NAMES", "the bot's names, comma-separated: a group message naming one is answered")
	fs.Float64Var(&c.ReplyProbability, "onebot-reply-probability", envFloat("NEKRO_ONEBOT_REPLY_PROBABILITY"), "chance (0-1) of answering a group message not addressed to the bot (env NEKRO_ONEBOT_REPLY_PROBABILITY)")
	adapter.ListFlag(fs, &c.Groups, "onebot-groups", "NEKRO_ONEBOT_GROUPS", "group ids the bot reads and answers, comma-separated; empty: every group")
	adapter.ListFlag(fs, &c.FileHosts, "onebot-file-hosts", "NEKRO_ONEBOT_FILE_HOSTS", "host:port of the implementation's own file server, which image downloads may reach though private")
	fs.DurationVar(&c.ActionTimeout, "onebot-action-timeout", envDuration("NEKRO_ONEBOT_ACTION_TIMEOUT", DefaultActionTimeout), "how long nekro waits for the answer to one OneBot action (env NEKRO_ONEBOT_ACTION_TIMEOUT)")
	return func() (adapter.Adapter, error) {
		if c.Token == "" && c.WSURL == "" {
			return nil, nil
		}
		return New(c)
	}
}

// Adapter is the OneBot v11 adapter.
type Adapter struct {
	cfg  Config
	rule adapter.ReplyRule

	hostMu sync.Mutex
	host   adapter.Host
	runCtx context.Context // set by Run: reverse connections live within it

	mu       sync.Mutex
	conns    map[*conn]struct{}
	route    map[string]string // chat key -> self id of the connection that last saw it
	statuses map[string]*adapter.Status
	names    map[string]cachedName // group/user -> display name
	seq      int64
}

// New checks c and returns an adapter for it.
func New(c Config) (*Adapter, error) {
	if c.WSURL != "" {
		u, err := url.Parse(c.WSURL)
		if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
			return nil, fmt.Errorf("--onebot-ws-url %q: want ws://host:port/ or wss://... (the implementation's forward WebSocket)", c.WSURL)
		}
	}
	if c.ReplyProbability < 0 || c.ReplyProbability > 1 {
		return nil, fmt.Errorf("--onebot-reply-probability %v: want a number from 0 to 1", c.ReplyProbability)
	}
	if c.ActionTimeout <= 0 {
		c.ActionTimeout = DefaultActionTimeout
	}
	a := &Adapter{cfg: c, rule: adapter.ReplyRule{Names: c.BotNames, Probability: c.ReplyProbability, Groups: c.Groups},
		conns: map[*conn]struct{}{}, route: map[string]string{}, statuses: map[string]*adapter.Status{}, names: map[string]cachedName{}}
	if c.WSURL != "" {
		a.statuses["forward"] = &adapter.Status{Name: Platform, Mode: "forward", Remote: redact(c.WSURL)}
	}
	if c.Token != "" {
		a.statuses["reverse"] = &adapter.Status{Name: Platform, Mode: "reverse", Remote: "waiting at " + Path}
	}
	return a, nil
}

// Info describes the adapter.
func (a *Adapter) Info() adapter.Info {
	var parts []string
	if a.cfg.Token != "" {
		parts = append(parts, "reverse WebSocket at "+Path+" (token set)")
	}
	if a.cfg.WSURL != "" {
		parts = append(parts, "forward to "+redact(a.cfg.WSURL))
	}
	if len(a.cfg.Groups) > 0 {
		parts = append(parts, "groups "+strings.Join(a.cfg.Groups, ","))
	}
	if len(a.cfg.BotNames) > 0 {
		parts = append(parts, "names "+strings.Join(a.cfg.BotNames, ","))
	}
	parts = append(parts, fmt.Sprintf("reply probability %g", a.cfg.ReplyProbability))
	return adapter.Info{Platform: Platform, Settings: strings.Join(parts, "; "), FileHosts: a.cfg.FileHosts}
}

// Routes mounts the reverse endpoint when a token is set.
func (a *Adapter) Routes() map[string]http.Handler {
	if a.cfg.Token == "" {
		return nil
	}
	return map[string]http.Handler{Path: http.HandlerFunc(a.reverse)}
}

// Run serves connections until ctx ends: it dials the forward URL, and
// lets reverse connections in, handing their messages to h.
func (a *Adapter) Run(ctx context.Context, h adapter.Host) error {
	a.hostMu.Lock()
	a.host, a.runCtx = h, ctx
	a.hostMu.Unlock()
	if a.cfg.WSURL != "" {
		go a.dialLoop(ctx)
	}
	<-ctx.Done()
	a.mu.Lock()
	for c := range a.conns {
		c.ws.Close(websocket.StatusGoingAway, "nekro is stopping")
	}
	a.mu.Unlock()
	return nil
}

func (a *Adapter) running() (adapter.Host, context.Context) {
	a.hostMu.Lock()
	defer a.hostMu.Unlock()
	return a.host, a.runCtx
}

// reverse is the endpoint implementations connect to.
func (a *Adapter) reverse(w http.ResponseWriter, r *http.Request) {
	got, hasToken := "", false
	if h := r.Header.Get("Authorization"); h != "" {
		got, hasToken = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(h, "Bearer "), "Token ")), true
	} else if q := r.URL.Query().Get("access_token"); q != "" {
		got, hasToken = q, true
	}
	switch {
	case !hasToken:
		http.Error(w, "OneBot: send the access token (Authorization: Bearer <token>, or ?access_token=); nekro's is --onebot-token", http.StatusUnauthorized)
		return
	case subtle.ConstantTimeCompare([]byte(got), []byte(a.cfg.Token)) != 1:
		http.Error(w, "OneBot: wrong access token (it must equal nekro's --onebot-token)", http.StatusForbidden)
		return
	}
	if role := r.Header.Get("X-Client-Role"); role != "" && !strings.EqualFold(role, "Universal") {
		http.Error(w, "OneBot: only Universal connections are served (X-Client-Role: Universal); set the implementation's reverse WebSocket to universal", http.StatusBadRequest)
		return
	}
	h, ctx := a.running()
	if h == nil {
		http.Error(w, "OneBot: nekro is starting; connect again", http.StatusServiceUnavailable)
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true}) // not a browser's: the token authenticates
	if err != nil {
		return // Accept answered
	}
	selfID := r.Header.Get("X-Self-ID")
	a.serveConn(ctx, h, ws, "reverse", selfID, r.RemoteAddr)
}

// dialLoop keeps a forward connection up until ctx ends.
func (a *Adapter) dialLoop(ctx context.Context) {
	h, _ := a.running()
	backoff := time.Second
	for ctx.Err() == nil {
		hdr := http.Header{}
		if a.cfg.Token != "" {
			hdr.Set("Authorization", "Bearer "+a.cfg.Token)
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ws, resp, err := websocket.Dial(dctx, a.cfg.WSURL, &websocket.DialOptions{HTTPHeader: hdr})
		cancel()
		if err != nil {
			if resp != nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
				err = fmt.Errorf("%w (HTTP %d: check --onebot-token against the implementation's access token)", err, resp.StatusCode)
			}
			a.setStatus("forward", func(s *adapter.Status) { s.LastError = err.Error() })
			h.Log().Warn("OneBot forward connection failed; retrying", "url", redact(a.cfg.WSURL), "in", backoff, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, maxBackoff)
			continue
		}
		backoff = time.Second
		a.serveConn(ctx, h, ws, "forward", "", redact(a.cfg.WSURL))
	}
}

func (a *Adapter) setStatus(key string, f func(*adapter.Status)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.statuses[key]
	if s == nil {
		s = &adapter.Status{Name: Platform}
		a.statuses[key] = s
	}
	f(s)
}

// Status lists the forward connection and each reverse one (by self id),
// up or last seen.
func (a *Adapter) Status() []adapter.Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []adapter.Status
	for _, s := range a.statuses {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(x, y adapter.Status) int { return strings.Compare(x.Mode+x.SelfID, y.Mode+y.SelfID) })
	return out
}

// Check dials the forward URL, if any, and says what doctor cannot know.
func (a *Adapter) Check(ctx context.Context) []adapter.Check {
	var out []adapter.Check
	if a.cfg.Token != "" {
		out = append(out, adapter.Check{OK: true, Detail: "reverse endpoint " + Path + " on nekro serve's address, token set " +
			"(whether the implementation connects shows in GET /api/status while nekro serve runs)"})
	}
	if a.cfg.WSURL != "" {
		hdr := http.Header{}
		if a.cfg.Token != "" {
			hdr.Set("Authorization", "Bearer "+a.cfg.Token)
		}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		ws, resp, err := websocket.Dial(dctx, a.cfg.WSURL, &websocket.DialOptions{HTTPHeader: hdr})
		if err != nil {
			detail := fmt.Sprintf("forward URL %s not reachable: %v", redact(a.cfg.WSURL), err)
			if resp != nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
				detail += " (the token was refused: check --onebot-token)"
			}
			out = append(out, adapter.Check{Detail: detail})
		} else {
			ws.Close(websocket.StatusNormalClosure, "nekro doctor")
			out = append(out, adapter.Check{OK: true, Detail: "forward URL " + redact(a.cfg.WSURL) + " accepts a WebSocket"})
		}
	}
	return out
}

// redact drops credentials and the access_token query from a URL shown
// to people.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(bad URL)"
	}
	q := u.Query()
	if q.Has("access_token") {
		q.Set("access_token", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

func envFloat(name string) float64 {
	f, _ := strconv.ParseFloat(os.Getenv(name), 64)
	return f
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

var errNoConnection = errors.New("no OneBot implementation is connected")

var (
	_ adapter.Adapter = (*Adapter)(nil)
	_ adapter.Router  = (*Adapter)(nil)
	_ adapter.Checker = (*Adapter)(nil)
)
