// Package discord connects nekro to Discord as a bot, written from the
// public Discord developer documentation (Gateway v10 and the REST API
// v10), with its own small Gateway client over WebSocket.
//
// How it connects: GET /gateway/bot (with "Authorization: Bot <token>")
// names the Gateway; nekro dials it, answers HELLO with heartbeats (the
// first after a random fraction of the interval, as the documentation
// asks; a heartbeat not acknowledged before the next one is due means a
// dead connection, dropped and resumed), IDENTIFYs with the intents
// GUILD_MESSAGES, DIRECT_MESSAGES and MESSAGE_CONTENT, and reads
// MESSAGE_CREATE events. After a drop it dials the resume_gateway_url
// READY gave and RESUMEs with the session id and the last sequence, so
// the events sent meanwhile are replayed; an invalid session starts a
// new one. A refused token (HTTP 401, close code 4004) or intents the
// application may not use (4014: the MESSAGE CONTENT intent is off in
// the developer portal) are logged once as an error naming the fix and
// retried only slowly (1 minute doubling to 30).
//
// Chat keys are discord-private_<channel id> for a DM and
// discord-group_<channel id> for a guild channel; user ids are
// discord:<user id> (that is how --super-users names them). DMs are
// always answered; guild messages when the bot is mentioned (<@id>), a
// message of the bot is replied to, or one of its names is written, or
// by chance (--discord-reply-probability); the others are stored as
// context. Messages of other bots and webhooks are stored, never
// answered, so two bots cannot talk to each other forever.
//
// Files: users' attachments are fetched by nekro's guarded downloader;
// the assistant's text goes out split at 2,000 characters, with its
// files attached (multipart files[n] with payload_json), and with
// allowed_mentions that let nothing ping: whatever the model writes,
// @everyone and <@id> stay text. The REST client keeps the rate-limit
// state of each route (X-RateLimit-Remaining, X-RateLimit-Reset-After)
// and waits out a 429's retry_after, per route or globally.
package discord

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

// Platform is the Discord platform key, the prefix of its chat keys.
const Platform = "discord"

// DefaultAPIURL is Discord's REST API, version 10.
const DefaultAPIURL = "https://discord.com/api/v10"

// Tuning.
const (
	maxBackoff      = time.Minute      // between attempts after network failures
	refusedBackoff  = time.Minute      // the first wait after the token or intents were refused
	maxRefused      = 30 * time.Minute // the longest such wait
	dialTimeout     = 20 * time.Second
	helloTimeout    = 30 * time.Second
	maxResumeDials  = 3        // failed dials of the resume URL before a new session
	maxFrame        = 32 << 20 // largest Gateway payload read
	eventQueue      = 256
	maxTextUnits    = 2000 // Discord's limit of a message's content
	maxFilesPerPost = 10   // Discord's limit of attachments per message
)

func init() {
	adapter.Register(adapter.Driver{Platform: Platform, Configure: configure})
}

// Config is the adapter's settings.
type Config struct {
	// Token is the bot's token (Developer Portal, Bot, Reset Token).
	Token string
	// APIURL is the REST API's base, DefaultAPIURL unless a proxy or a
	// test server stands in; the Gateway's URL comes from it
	// (GET /gateway/bot). Its host may serve users' files though private.
	APIURL string
	// Guilds and Channels, when either is not empty, are the only guilds
	// and guild channels whose messages are read (DMs always are).
	Guilds, Channels []string
	// BotNames are names that address the bot in a guild channel (its
	// Discord username and display name count too).
	BotNames []string
	// ReplyProbability answers any other guild message by chance, 0-1.
	ReplyProbability float64
}

func configure(fs *flag.FlagSet) func() (adapter.Adapter, error) {
	var c Config
	adapter.SecretString(fs, &c.Token, "discord-token", "NEKRO_DISCORD_TOKEN", "Discord bot token; enables the Discord adapter")
	fs.StringVar(&c.APIURL, "discord-api-url", envOr("NEKRO_DISCORD_API_URL", DefaultAPIURL), "Discord REST API base; the Gateway URL comes from its GET /gateway/bot (env NEKRO_DISCORD_API_URL)")
	adapter.ListFlag(fs, &c.Guilds, "discord-guilds", "NEKRO_DISCORD_GUILDS", "guild (server) ids whose channels the bot reads and answers, comma-separated; with --discord-channels empty too: every guild")
	adapter.ListFlag(fs, &c.Channels, "discord-channels", "NEKRO_DISCORD_CHANNELS", "guild channel ids the bot reads and answers, comma-separated (besides those of --discord-guilds)")
	adapter.ListFlag(fs, &c.BotNames, "discord-bot-names", "NEKRO_DISCORD_BOT_NAMES", "the bot's names, comma-separated: a guild message naming one is answered")
	fs.Float64Var(&c.ReplyProbability, "discord-reply-probability", envFloat("NEKRO_DISCORD_REPLY_PROBABILITY"), "chance (0-1) of answering a guild message not addressed to the bot (env NEKRO_DISCORD_REPLY_PROBABILITY)")
	return func() (adapter.Adapter, error) {
		if c.Token == "" {
			return nil, nil
		}
		return New(c)
	}
}

// Adapter is the Discord adapter.
type Adapter struct {
	cfg  Config
	rule adapter.ReplyRule
	api  *rest

	mu     sync.Mutex
	status adapter.Status
	self   botUser
	sess   session
	// resumeFails counts the dials of the resume URL that failed in a row.
	resumeFails int
	reported    string // the refusal last logged as an error, so it is logged once
}

// botUser is who the bot is, from READY.
type botUser struct {
	id    string
	names []string
}

// session is what a RESUME needs: READY's session id and URL, and the
// sequence number of the last dispatch read.
type session struct {
	id        string
	resumeURL string
	seq       int64
}

// New checks c and returns an adapter for it.
func New(c Config) (*Adapter, error) {
	if c.Token == "" {
		return nil, errors.New("--discord-token is empty (the bot's token, from the Developer Portal)")
	}
	if c.APIURL == "" {
		c.APIURL = DefaultAPIURL
	}
	u, err := url.Parse(c.APIURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--discord-api-url %q: want https://host/path (the REST API's base, e.g. %s)", c.APIURL, DefaultAPIURL)
	}
	if c.ReplyProbability < 0 || c.ReplyProbability > 1 {
		return nil, fmt.Errorf("--discord-reply-probability %v: want a number from 0 to 1", c.ReplyProbability)
	}
	a := &Adapter{cfg: c, rule: adapter.ReplyRule{Names: c.BotNames, Probability: c.ReplyProbability},
		api:    newREST(c.APIURL, c.Token),
		status: adapter.Status{Name: Platform, Mode: "gateway", Remote: "GET " + strings.TrimSuffix(redact(c.APIURL), "/") + "/gateway/bot"}}
	return a, nil
}

// Info describes the adapter.
func (a *Adapter) Info() adapter.Info {
	parts := []string{"token set", "API " + redact(a.cfg.APIURL)}
	if len(a.cfg.Guilds) > 0 {
		parts = append(parts, "guilds "+strings.Join(a.cfg.Guilds, ","))
	}
	if len(a.cfg.Channels) > 0 {
		parts = append(parts, "channels "+strings.Join(a.cfg.Channels, ","))
	}
	if len(a.cfg.BotNames) > 0 {
		parts = append(parts, "names "+strings.Join(a.cfg.BotNames, ","))
	}
	parts = append(parts, fmt.Sprintf("reply probability %g", a.cfg.ReplyProbability))
	info := adapter.Info{Platform: Platform, Settings: strings.Join(parts, "; ")}
	// Attachments come from Discord's public CDN; an API base set by the
	// operator (a proxy, a test server) may serve them from its own host.
	if a.cfg.APIURL != DefaultAPIURL {
		if hp := hostPort(a.cfg.APIURL); hp != "" {
			info.FileHosts = []string{hp}
		}
	}
	return info
}

// Run keeps a Gateway session up until ctx ends, handing every message
// read to h. It returns only when ctx ends.
func (a *Adapter) Run(ctx context.Context, h adapter.Host) error {
	events := make(chan messageCreate, eventQueue)
	done := make(chan struct{})
	go func() { defer close(done); a.handleEvents(ctx, h, events) }()
	defer func() { <-done }()

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
			h.Log().Warn("Discord gateway connection dropped; reconnecting", "reason", d.err, "resume", a.canResume(), "in", wait.Round(time.Millisecond))
		default:
			wait = max(wait, jitter(backoff))
			backoff = min(backoff*2, maxBackoff)
			h.Log().Warn("Discord gateway connection failed; retrying", "err", d.err, "in", wait.Round(time.Millisecond))
		}
		a.setStatus(func(s *adapter.Status) { s.Connected, s.Since, s.LastError = false, time.Now().UTC(), d.err.Error() })
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	return nil
}

// logRefusal logs a refused token or intents as an error the first time,
// and quietly after (the status API keeps showing it).
func (a *Adapter) logRefusal(h adapter.Host, err error, wait time.Duration) {
	a.mu.Lock()
	first := a.reported != err.Error()
	a.reported = err.Error()
	a.mu.Unlock()
	if first {
		h.Log().Error("Discord refused the bot; retrying slowly until the settings change", "err", err, "in", wait)
	} else {
		h.Log().Debug("Discord still refuses the bot", "err", err, "in", wait)
	}
}

func (a *Adapter) canResume() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sess.id != "" && a.sess.resumeURL != ""
}

func (a *Adapter) setStatus(f func(*adapter.Status)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f(&a.status)
}

// Status is the Gateway connection's.
func (a *Adapter) Status() []adapter.Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	return []adapter.Status{a.status}
}

// Check asks the REST API who the bot is (GET /users/@me) and where its
// Gateway is (GET /gateway/bot): both need an accepted token.
func (a *Adapter) Check(ctx context.Context) []adapter.Check {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var me user
	if err := a.api.do(ctx, request{method: "GET", path: "/users/@me"}, &me); err != nil {
		return []adapter.Check{{Detail: err.Error()}}
	}
	out := []adapter.Check{{OK: true, Detail: fmt.Sprintf("token accepted: the bot is %s (id %s)", me.name(), me.ID)}}
	gb, err := a.api.gatewayBot(ctx)
	if err != nil {
		return append(out, adapter.Check{Detail: err.Error()})
	}
	return append(out, adapter.Check{OK: true, Detail: fmt.Sprintf("gateway %s; %d of %d session starts left today "+
		"(the MESSAGE CONTENT intent shows only when nekro serve connects: close code 4014 if it is off)",
		gb.URL, gb.SessionStartLimit.Remaining, gb.SessionStartLimit.Total)})
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

func envFloat(name string) float64 {
	f, _ := strconv.ParseFloat(os.Getenv(name), 64)
	return f
}

// allowed says whether messages of a guild channel are read.
func (c Config) allowed(guild, channel string) bool {
	if len(c.Guilds) == 0 && len(c.Channels) == 0 {
		return true
	}
	return slices.Contains(c.Guilds, guild) || slices.Contains(c.Channels, channel)
}

var (
	_ adapter.Adapter = (*Adapter)(nil)
	_ adapter.Checker = (*Adapter)(nil)
)
