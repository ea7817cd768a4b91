// Package qqbot connects nekro to QQ through QQ's official bot platform
// (the QQ open platform's bot API, v2), written from its public
// documentation, with its own small WebSocket gateway client: no NapCat
// and no personal QQ account.
//
// How it connects: an access token is asked for with the bot's app id
// and secret (POST https://bots.qq.com/app/getAppAccessToken) and asked
// for again shortly before it expires; every REST call carries
// "Authorization: QQBot <token>". GET /gateway names the WebSocket
// gateway; nekro dials it, answers HELLO with heartbeats, IDENTIFYs with
// "QQBot <token>" and the intent GROUP_AND_C2C_EVENT (1<<25), and reads
// GROUP_AT_MESSAGE_CREATE and C2C_MESSAGE_CREATE. After a drop it
// RESUMEs with the session id and the last sequence, so the events sent
// meanwhile are replayed; an invalid session starts a new one. A secret
// the token endpoint refuses, or a gateway refusal no reconnection can
// fix (close codes 4004, 4010-4014, 4914, 4915), is logged once as an
// error naming the fix and retried only slowly (1 minute doubling to 30).
//
// Chat keys are qqbot-group_<group openid> and qqbot-private_<user
// openid>; user ids are qqbot:<openid> (a group member's member_openid,
// which QQ gives per group, or a private user's user_openid). The
// platform delivers a group message to a bot only when it is
// @-mentioned, so every group message is a trigger; private messages
// always are.
//
// Replies are passive, as the platform now requires (it stopped
// delivering active pushes in April 2025): each message sent carries the
// msg_id of the chat's latest incoming message and a msg_seq counting
// the replies to it (1, 2, ...). The platform accepts them within its
// reply window (5 minutes in groups, 60 in private chats) and up to 5
// replies a message; a message the window has closed on is not sent: it
// is logged as an error and shown in the status, never dropped silently.
//
// Files: users' attachments are fetched by nekro's guarded downloader.
// The assistant's images (and videos) go out through the rich-media
// upload (POST /v2/groups/{group_openid}/files or /v2/users/{openid}/files
// with file_data, base64) and then a media message (msg_type 7) with the
// file_info the upload gave. The platform does not yet take other files
// from bots; they are named in the text instead.
package qqbot

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nekro-go/nekro/adapter"
)

// Platform is the QQ bot platform key, the prefix of its chat keys.
const Platform = "qqbot"

// The platform's addresses.
const (
	DefaultAPIURL   = "https://api.sgroup.qq.com"
	SandboxAPIURL   = "https://sandbox.api.sgroup.qq.com"
	DefaultTokenURL = "https://bots.qq.com/app/getAppAccessToken"
)

// Reply windows: how long after a user's message the platform accepts
// a passive reply to it.
const (
	groupReplyWindow   = 5 * time.Minute
	privateReplyWindow = 60 * time.Minute
)

// Tuning.
const (
	maxBackoff     = time.Minute      // between attempts after network failures
	refusedBackoff = time.Minute      // the first wait after the credentials were refused
	maxRefused     = 30 * time.Minute // the longest such wait
	dialTimeout    = 20 * time.Second
	helloTimeout   = 30 * time.Second
	maxFrame       = 16 << 20 // largest gateway payload read
	eventQueue     = 256
)

func init() {
	adapter.Register(adapter.Driver{Platform: Platform, Configure: configure})
}

// Config is the adapter's settings.
type Config struct {
	// AppID and Secret are the bot's AppID and AppSecret (QQ open
	// platform, the bot's 开发设置 page).
	AppID, Secret string
	// APIURL is the OpenAPI's base: DefaultAPIURL, SandboxAPIURL when
	// Sandbox, or a proxy or test server. Its host may serve users'
	// files though private.
	APIURL string
	// Sandbox uses the platform's sandbox environment (SandboxAPIURL)
	// when APIURL is not given.
	Sandbox bool
	// TokenURL is the access-token endpoint, DefaultTokenURL unless a
	// test server stands in.
	TokenURL string
}

func configure(fs *flag.FlagSet) func() (adapter.Adapter, error) {
	var c Config
	fs.StringVar(&c.AppID, "qqbot-app-id", os.Getenv("NEKRO_QQBOT_APP_ID"), "QQ official bot: the bot's AppID (with --qqbot-secret, enables the adapter) (env NEKRO_QQBOT_APP_ID)")
	adapter.SecretString(fs, &c.Secret, "qqbot-secret", "NEKRO_QQBOT_SECRET", "QQ official bot: the bot's AppSecret")
	fs.StringVar(&c.APIURL, "qqbot-api-url", os.Getenv("NEKRO_QQBOT_API_URL"), "QQ official bot: the OpenAPI base (default "+DefaultAPIURL+", or "+SandboxAPIURL+" with --qqbot-sandbox) (env NEKRO_QQBOT_API_URL)")
	fs.BoolVar(&c.Sandbox, "qqbot-sandbox", envBool("NEKRO_QQBOT_SANDBOX"), "QQ official bot: use the platform's sandbox environment (env NEKRO_QQBOT_SANDBOX)")
	fs.StringVar(&c.TokenURL, "qqbot-token-url", envOr("NEKRO_QQBOT_TOKEN_URL", DefaultTokenURL), "QQ official bot: the access-token endpoint (env NEKRO_QQBOT_TOKEN_URL)")
	return func() (adapter.Adapter, error) {
		if c.AppID == "" && c.Secret == "" {
			return nil, nil
		}
		return New(c)
	}
}

// Adapter is the QQ official bot adapter.
type Adapter struct {
	cfg    Config
	tokens *tokenSource
	api    *rest

	mu       sync.Mutex
	status   adapter.Status
	sess     session
	reported string            // the refusal last logged as an error, so it is logged once
	replies  map[string]*reply // chat key -> the message replies answer
	log      *slog.Logger      // Run's host's, for what Send reports
	// lateLogged holds the user messages whose late replies were logged.
	lateLogged recent
}

// session is what a RESUME needs: READY's session id and the sequence
// number of the last dispatch read.
type session struct {
	id  string
	seq int64
}

// New checks c and returns an adapter for it.
func New(c Config) (*Adapter, error) {
	if c.AppID == "" {
		return nil, errors.New("--qqbot-app-id is empty (the bot's AppID, from the QQ open platform's 开发设置 page)")
	}
	if c.Secret == "" {
		return nil, errors.New("--qqbot-secret is empty: set NEKRO_QQBOT_SECRET to the bot's AppSecret (the QQ open platform's 开发设置 page)")
	}
	if c.APIURL == "" {
		c.APIURL = DefaultAPIURL
		if c.Sandbox {
			c.APIURL = SandboxAPIURL
		}
	}
	if c.TokenURL == "" {
		c.TokenURL = DefaultTokenURL
	}
	for flagName, raw := range map[string]string{"--qqbot-api-url": c.APIURL, "--qqbot-token-url": c.TokenURL} {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%s %q: want an http:// or https:// URL", flagName, raw)
		}
	}
	ts := newTokenSource(c.TokenURL, c.AppID, c.Secret)
	a := &Adapter{cfg: c, tokens: ts, api: newREST(c.APIURL, ts), replies: map[string]*reply{}, lateLogged: recent{ids: map[string]bool{}},
		status: adapter.Status{Name: Platform, Mode: "gateway", Remote: "GET " + strings.TrimSuffix(redact(c.APIURL), "/") + "/gateway"}}
	return a, nil
}

// Info describes the adapter.
func (a *Adapter) Info() adapter.Info {
	parts := []string{"app id " + a.cfg.AppID, "secret set", "API " + redact(a.cfg.APIURL)}
	if a.cfg.Sandbox {
		parts = append(parts, "sandbox")
	}
	if a.cfg.TokenURL != DefaultTokenURL {
		parts = append(parts, "token endpoint "+redact(a.cfg.TokenURL))
	}
	info := adapter.Info{Platform: Platform, Settings: strings.Join(parts, "; ")}
	// Attachments come from QQ's public media servers; an API base set by
	// the operator (a proxy, a test server) may serve them from its host.
	if a.cfg.APIURL != DefaultAPIURL && a.cfg.APIURL != SandboxAPIURL {
		if hp := hostPort(a.cfg.APIURL); hp != "" {
			info.FileHosts = []string{hp}
		}
	}
	return info
}

// Run keeps a gateway session up until ctx ends, handing every message
// read to h. It returns only when ctx ends.
func (a *Adapter) Run(ctx context.Context, h adapter.Host) error {
	a.mu.Lock()
	a.log = h.Log()
	a.mu.Unlock()
	events := make(chan event, eventQueue)
	done := make(chan struct{})
	go func() { defer close(done); a.handleEvents(ctx, h, events) }()
	refreshed := make(chan struct{})
	go func() { defer close(refreshed); a.tokens.keepFresh(ctx, h.Log()) }()
	defer func() { <-done; <-refreshed }()

	backoff, refused := time.Second, refusedBackoff
	for ctx.Err() == nil {
		d := a.connect(ctx, h, events)
		if ctx.Err() != nil {
			break
		}
		wait := d.wait
		switch {
		case d.refused:
			a.logRefusal(h, d.err, refused)
			wait = max(wait, refused)
			refused = min(refused*2, maxRefused)
		case d.ready:
			backoff, refused = time.Second, refusedBackoff
			wait = max(wait, jitter(backoff))
			h.Log().Warn("QQ bot gateway connection dropped; reconnecting", "reason", d.err, "resume", a.canResume(), "in", wait.Round(time.Millisecond))
		default:
			wait = max(wait, jitter(backoff))
			backoff = min(backoff*2, maxBackoff)
			h.Log().Warn("QQ bot gateway connection failed; retrying", "err", d.err, "in", wait.Round(time.Millisecond))
		}
		a.setStatus(func(s *adapter.Status) { s.Connected, s.Since, s.LastError = false, time.Now().UTC(), d.err.Error() })
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	return nil
}

// logRefusal logs refused credentials as an error the first time, and
// quietly after (the status API keeps showing it).
func (a *Adapter) logRefusal(h adapter.Host, err error, wait time.Duration) {
	a.mu.Lock()
	first := a.reported != err.Error()
	a.reported = err.Error()
	a.mu.Unlock()
	if first {
		h.Log().Error("QQ bot platform refused the bot; retrying slowly until the settings change", "err", err, "in", wait)
	} else {
		h.Log().Debug("QQ bot platform still refuses the bot", "err", err, "in", wait)
	}
}

func (a *Adapter) canResume() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sess.id != ""
}

func (a *Adapter) setStatus(f func(*adapter.Status)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f(&a.status)
}

// Status is the gateway connection's.
func (a *Adapter) Status() []adapter.Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	return []adapter.Status{a.status}
}

// Check asks for an access token with the app id and secret, then where
// the gateway is (GET /gateway), which needs the token accepted.
func (a *Adapter) Check(ctx context.Context) []adapter.Check {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	tok, err := a.tokens.fetch(ctx)
	if err != nil {
		return []adapter.Check{{Detail: err.Error()}}
	}
	out := []adapter.Check{{OK: true, Detail: fmt.Sprintf("access token granted for app id %s (expires in %s)", a.cfg.AppID, time.Until(tok.expires).Round(time.Second))}}
	gw, err := a.api.gateway(ctx)
	if err != nil {
		return append(out, adapter.Check{Detail: err.Error()})
	}
	return append(out, adapter.Check{OK: true, Detail: "gateway " + gw + " (whether the intents are granted shows only when nekro serve connects)"})
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

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envBool(name string) bool {
	b, _ := strconv.ParseBool(os.Getenv(name))
	return b
}

var (
	_ adapter.Adapter = (*Adapter)(nil)
	_ adapter.Checker = (*Adapter)(nil)
)
