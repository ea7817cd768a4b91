// Package satori connects nekro to a Satori server, written from the
// public Satori protocol documentation (Protocol: Events, API; Message
// Encoding; Standard Elements). Satori is the cross-platform protocol of
// the Koishi ecosystem: one server (Koishi with its Satori server plugin,
// or another SDK) bridges many chat platforms (QQ, KOOK, Lark, LINE,
// Matrix, WhatsApp, Discord, Telegram, ...), each bot account on them a
// "login", and nekro reaches all of them through it.
//
// How it connects: nekro dials the event stream, ws(s)://<base>/v1/events,
// sends IDENTIFY (op 3) with the token and, after a first connection, the
// sn of the last event it read; the server answers READY (op 4) with its
// logins and replays the events sent since that sn. nekro sends PING
// (op 1) every 10 s and the server answers PONG (op 2); a connection
// silent for three intervals is dropped. Events (op 0) named
// message-created become chat messages; login-added, -updated and
// -removed keep the logins current. After a drop nekro dials again with
// backoff (1 s doubling to a minute); a refused token (close code 4004,
// or HTTP 401/403 at the upgrade) is logged once as an error naming the
// fix and retried only every 1 to 15 minutes. Messages go out with the
// HTTP API, POST <base>/v1/message.create, carrying the login's
// Satori-Platform and Satori-User-ID headers.
//
// Chat keys are satori-<platform>-group_<channel id> for a guild channel
// and satori-<platform>-private_<channel id> for a direct one (the
// event's channel.type, 1 DIRECT); user ids are satori:<platform>:<user
// id>. The Satori platform name is part of the key because Satori
// promises ids unique only within a platform. Private channels are always
// answered; group channels when the bot is mentioned (<at id="self"/>),
// a message of the bot is quoted, or one of its names is written, or by
// chance; the others are stored as context.
//
// Content is Satori's element markup: text, at, sharp, a, img, file,
// audio, video, quote and the styling elements are read; the files are
// fetched by nekro's guarded downloader (the Satori server's host may be
// private). What the AI writes is escaped, so it can never become an
// element (no <at type="all"/>); its files go out as resource elements
// whose src is a base64 data: URL.
package satori

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nekro-go/nekro/adapter"
)

// Platform is the adapter's platform key, the prefix of its chat keys.
const Platform = "satori"

// Tuning.
const (
	maxBackoff     = time.Minute      // between attempts after network failures
	refusedBackoff = time.Minute      // the first wait after the token was refused
	maxRefused     = 15 * time.Minute // the longest such wait
	dialTimeout    = 20 * time.Second
	readyTimeout   = 30 * time.Second
	pingInterval   = 10 * time.Second // the protocol's
	maxFrame       = 64 << 20         // largest event read
	eventQueue     = 256
	rememberSent   = 512 // ids of the bot's messages kept per login, to see replies to them
)

func init() {
	adapter.Register(adapter.Driver{Platform: Platform, Configure: configure})
}

// Config is the adapter's settings.
type Config struct {
	// URL is the Satori server's base, the part before /v1 (Koishi's
	// server plugin: http://127.0.0.1:5140/satori).
	URL string
	// Token is the server's token, "" when it asks for none.
	Token string
	// Platforms, when not empty, are the only Satori platforms (login
	// platform names) read and answered.
	Platforms []string
	// BotNames are names that address the bot in a group channel (its
	// name on each platform counts too).
	BotNames []string
	// ReplyProbability answers any other group message by chance, 0-1.
	ReplyProbability float64
	// PingInterval is how often the stream is pinged; 0 means 10 s.
	PingInterval time.Duration
}

func configure(fs *flag.FlagSet) func() (adapter.Adapter, error) {
	var c Config
	fs.StringVar(&c.URL, "satori-url", os.Getenv("NEKRO_SATORI_URL"), "the Satori server's base URL, before /v1 (e.g. http://127.0.0.1:5140/satori for Koishi); enables the Satori adapter (env NEKRO_SATORI_URL)")
	adapter.SecretString(fs, &c.Token, "satori-token", "NEKRO_SATORI_TOKEN", "the Satori server's token, if it has one")
	adapter.ListFlag(fs, &c.Platforms, "satori-platforms", "NEKRO_SATORI_PLATFORMS", "Satori platforms (login platform names, e.g. discord,qq) read and answered, comma-separated; empty: all")
	adapter.ListFlag(fs, &c.BotNames, "satori-bot-names", "NEKRO_SATORI_BOT_NAMES", "the bot's names, comma-separated: a group message naming one is answered")
	fs.Float64Var(&c.ReplyProbability, "satori-reply-probability", envFloat("NEKRO_SATORI_REPLY_PROBABILITY"), "chance (0-1) of answering a group message not addressed to the bot (env NEKRO_SATORI_REPLY_PROBABILITY)")
	return func() (adapter.Adapter, error) {
		if c.URL == "" {
			return nil, nil
		}
		return New(c)
	}
}

// Adapter is the Satori adapter.
type Adapter struct {
	cfg  Config
	rule adapter.ReplyRule
	base string // the server's base, without /v1 or a trailing slash
	api  *client

	mu        sync.Mutex
	conn      adapter.Status // the event stream's
	logins    map[string]*login
	proxyURLs []string
	sn        int64             // the last event's, for IDENTIFY after a reconnect
	chatLogin map[string]string // chat key -> the self id that last read it
	reported  string            // the refusal last logged as an error, so it is logged once
}

// login is one bot account the server bridges.
type login struct {
	platform, selfID string
	names            []string
	online           bool
	received, sent   int64
	since            time.Time
	sentIDs          []string // ids of the bot's latest messages, oldest first
}

func loginKey(platform, selfID string) string { return platform + "\x00" + selfID }

// New checks c and returns an adapter for it.
func New(c Config) (*Adapter, error) {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--satori-url %q: want http(s)://host:port[/path], the Satori server's base before /v1 (e.g. http://127.0.0.1:5140/satori)", c.URL)
	}
	if c.ReplyProbability < 0 || c.ReplyProbability > 1 {
		return nil, fmt.Errorf("--satori-reply-probability %v: want a number from 0 to 1", c.ReplyProbability)
	}
	for _, p := range c.Platforms {
		if bad := platformProblem(p); bad != "" {
			return nil, fmt.Errorf("--satori-platforms %q: %s", p, bad)
		}
	}
	if c.PingInterval <= 0 {
		c.PingInterval = pingInterval
	}
	u.RawQuery, u.Fragment = "", ""
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/v1")
	base := strings.TrimSuffix(u.String(), "/")
	a := &Adapter{cfg: c, base: base, api: newClient(base, c.Token),
		rule:   adapter.ReplyRule{Names: c.BotNames, Probability: c.ReplyProbability},
		logins: map[string]*login{}, chatLogin: map[string]string{},
		conn: adapter.Status{Name: Platform, Mode: "forward", Remote: eventsURL(base, true)}}
	return a, nil
}

// platformProblem says why a Satori platform name cannot be part of a
// chat key, "" when it can: satori-<platform>-group_<id> must split back
// into its parts.
func platformProblem(p string) string {
	switch {
	case p == "":
		return "empty"
	case strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '/' }):
		return "holds spaces, slashes or control characters"
	case strings.Contains(p, "-group_") || strings.Contains(p, "-private_"):
		return `holds "-group_" or "-private_"`
	}
	return ""
}

// Info describes the adapter.
func (a *Adapter) Info() adapter.Info {
	parts := []string{"server " + redact(a.base)}
	if a.cfg.Token != "" {
		parts = append(parts, "token set")
	} else {
		parts = append(parts, "no token")
	}
	if len(a.cfg.Platforms) > 0 {
		parts = append(parts, "platforms "+strings.Join(a.cfg.Platforms, ","))
	}
	if len(a.cfg.BotNames) > 0 {
		parts = append(parts, "names "+strings.Join(a.cfg.BotNames, ","))
	}
	parts = append(parts, fmt.Sprintf("reply probability %g", a.cfg.ReplyProbability))
	info := adapter.Info{Platform: Platform, Settings: strings.Join(parts, "; ")}
	// Resources often come from the server itself (its proxy route, or
	// an adapter's local file server next to it), usually on a private
	// address.
	if hp := hostPort(a.base); hp != "" {
		info.FileHosts = []string{hp}
	}
	return info
}

// Run keeps the event stream up until ctx ends, handing every message
// read to h. It returns only when ctx ends.
func (a *Adapter) Run(ctx context.Context, h adapter.Host) error {
	events := make(chan event, eventQueue)
	done := make(chan struct{})
	go func() { defer close(done); a.handleEvents(ctx, h, events) }()
	defer func() { <-done }()

	backoff, refused := time.Second, refusedBackoff
	for ctx.Err() == nil {
		d := a.connect(ctx, h, events)
		if ctx.Err() != nil {
			break
		}
		var wait time.Duration
		switch {
		case d.refused:
			wait = refused
			a.logRefusal(h, d.err, wait)
			refused = min(refused*2, maxRefused)
		case d.ready:
			backoff, refused = time.Second, refusedBackoff
			wait = jitter(backoff)
			h.Log().Warn("Satori event stream dropped; reconnecting", "reason", d.err, "resume_sn", a.lastSN(), "in", wait.Round(time.Millisecond))
		default:
			wait = jitter(backoff)
			backoff = min(backoff*2, maxBackoff)
			h.Log().Warn("Satori event stream connection failed; retrying", "err", d.err, "in", wait.Round(time.Millisecond))
		}
		a.mu.Lock()
		a.conn.Connected, a.conn.Since, a.conn.LastError = false, time.Now().UTC(), d.err.Error()
		for _, l := range a.logins {
			l.since = a.conn.Since
		}
		a.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	h.Log().Info("Satori event stream closed: nekro is stopping", "server", redact(a.base))
	return nil
}

// logRefusal logs a refused token as an error the first time, and
// quietly after (the status API keeps showing it).
func (a *Adapter) logRefusal(h adapter.Host, err error, wait time.Duration) {
	a.mu.Lock()
	first := a.reported != err.Error()
	a.reported = err.Error()
	a.mu.Unlock()
	if first {
		h.Log().Error("the Satori server refused nekro; retrying slowly until the settings change", "err", err, "in", wait)
	} else {
		h.Log().Debug("the Satori server still refuses nekro", "err", err, "in", wait)
	}
}

func (a *Adapter) lastSN() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sn
}

// Status lists the event stream's connection, then each login's.
func (a *Adapter) Status() []adapter.Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := []adapter.Status{a.conn}
	keys := make([]string, 0, len(a.logins))
	for k := range a.logins {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		l := a.logins[k]
		out = append(out, adapter.Status{Name: Platform + ":" + l.platform, Mode: "login", Connected: a.conn.Connected && l.online,
			SelfID: l.selfID, Since: l.since, LastError: a.conn.LastError, Remote: redact(a.base), Received: l.received, Sent: l.sent})
	}
	return out
}

// Check does the event stream's handshake (IDENTIFY, READY) to see that
// the server answers and accepts the token and which logins it bridges,
// then asks the HTTP API for each login (login.get).
func (a *Adapter) Check(ctx context.Context) []adapter.Check {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	r, err := a.handshake(ctx)
	if err != nil {
		return []adapter.Check{{Detail: err.Error()}}
	}
	var names []string
	var logins []loginBody
	for _, l := range r.Logins {
		p, id := l.platform(), l.selfID()
		if p == "" || id == "" || !a.platformAllowed(p) {
			continue
		}
		logins = append(logins, l)
		state := "online"
		if !l.isOnline() {
			state = "not online"
		}
		names = append(names, fmt.Sprintf("%s:%s (%s, %s)", p, id, l.User.displayName(), state))
	}
	if len(logins) == 0 {
		return []adapter.Check{{Detail: fmt.Sprintf("the Satori server %s accepts the token but has no login%s yet: "+
			"connect a bot account to it (a Koishi adapter plugin)", redact(a.base), a.allowNote())}}
	}
	out := []adapter.Check{{OK: true, Detail: fmt.Sprintf("the Satori server %s accepts the token; logins: %s", redact(a.base), strings.Join(names, ", "))}}
	for _, l := range logins {
		var got loginBody
		if err := a.api.call(ctx, l.platform(), l.selfID(), "login.get", struct{}{}, &got); err != nil {
			out = append(out, adapter.Check{Detail: err.Error()})
			continue
		}
		out = append(out, adapter.Check{OK: true, Detail: fmt.Sprintf("HTTP API answers for %s:%s (login.get)", l.platform(), l.selfID())})
	}
	return out
}

func (a *Adapter) allowNote() string {
	if len(a.cfg.Platforms) == 0 {
		return ""
	}
	return " on the platforms " + strings.Join(a.cfg.Platforms, ",")
}

func (a *Adapter) platformAllowed(p string) bool {
	return len(a.cfg.Platforms) == 0 || slices.Contains(a.cfg.Platforms, p)
}

// eventsURL is the event stream's WebSocket URL; shown, without a
// password.
func eventsURL(base string, shown bool) string {
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	if u.Scheme == "https" {
		u.Scheme = "wss"
	} else {
		u.Scheme = "ws"
	}
	u.Path += "/v1/events"
	if shown {
		return u.Redacted()
	}
	return u.String()
}

// redact drops a password from a URL shown to people.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(bad URL)"
	}
	return u.Redacted()
}

func hostPort(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// jitter is d give or take a quarter.
func jitter(d time.Duration) time.Duration {
	return d*3/4 + time.Duration(rand.Int64N(int64(d)/2+1))
}

func envFloat(name string) float64 {
	f, _ := strconv.ParseFloat(os.Getenv(name), 64)
	return f
}

// errRefused marks a token the server refused.
var errRefused = errors.New("the Satori server refused the token")

var (
	_ adapter.Adapter = (*Adapter)(nil)
	_ adapter.Checker = (*Adapter)(nil)
)
