// Package telegram connects nekro to Telegram through the Bot API
// (core.telegram.org/bots/api), a client of its own over net/http: the
// API is plain HTTPS and JSON, and a client of our own keeps the token,
// which the API puts in every URL's path, out of every error and log line.
//
// Two ways to receive updates:
//
//   - long polling (the default): getUpdates with a 50 s timeout, the
//     offset advanced past every update handled so none is answered
//     twice; a failed poll is retried with backoff (1 s doubling to 30 s),
//     and a 409 (another poller, or a webhook set) is reported as such.
//     A webhook left set by an earlier run is removed first.
//   - webhook (--telegram-webhook-url): nekro calls setWebhook with that
//     public HTTPS URL, which must reach nekro serve's /telegram/webhook
//     (through a reverse proxy, usually), and a secret token derived from
//     the bot token; Telegram sends it in X-Telegram-Bot-Api-Secret-Token
//     and a request without it is refused with 401.
//
// At start getMe names the bot (its id and @username, for mentions); a
// token the API refuses is reported once, clearly, then tried again with
// backoff up to ten minutes apart.
//
// Chat keys are telegram-private_<chat id> and telegram-group_<chat id>
// (groups and supergroups; group ids are negative); user ids are
// telegram:<user id>, as --super-users names them. Private messages are
// always answered; group messages when they @mention the bot (an entity,
// offsets in UTF-16 units as the API counts), reply to one of its
// messages, carry a /command@bot, name it (--telegram-bot-names, its
// first name), or by chance; the others are stored as context.
// --telegram-chats, when given, are the only chats read. Photos (the
// largest size), documents, videos, audio, voice notes and animations are
// located with getFile and downloaded by nekro, through its guard, with
// the API's host allowed. The assistant's text goes out as plain text
// (no parse_mode, so nothing it writes can break the Markdown or HTML
// parser), split at 4096 UTF-16 units; its images with sendPhoto, other
// files with sendDocument, as multipart uploads. A 429 is waited out
// (retry_after) and the call made again.
package telegram

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nekro-go/nekro/adapter"
)

// Platform is Telegram's platform key, the prefix of its chat keys.
const Platform = "telegram"

// DefaultAPIURL is the public Bot API.
const DefaultAPIURL = "https://api.telegram.org"

// WebhookPath is where nekro serve takes Telegram's webhook calls.
const WebhookPath = "/telegram/webhook"

// Timing.
const (
	pollTimeout   = 50 * time.Second // getUpdates' long poll
	callTimeout   = 30 * time.Second // any other call, but sending files
	maxRetryAfter = 2 * time.Minute  // the longest a call waits out 429s
	maxBackoff    = 30 * time.Second // between failed polls
	maxAuthWait   = 10 * time.Minute // between getMe calls with a refused token
)

func init() {
	adapter.Register(adapter.Driver{Platform: Platform, Configure: configure})
}

// Config is the adapter's settings.
type Config struct {
	// Token is the bot's token from @BotFather. Setting it turns the
	// adapter on.
	Token string
	// APIURL is the Bot API's root (default DefaultAPIURL); a local Bot
	// API server, or a test's simulator.
	APIURL string
	// WebhookURL, when set, is the public HTTPS URL Telegram posts
	// updates to (it must reach WebhookPath on nekro serve); "" polls.
	WebhookURL string
	// Chats, when not empty, are the only chat ids read and answered
	// (private chats' ids are the users' ids; groups' are negative).
	Chats []string
	// BotNames are the bot's names: a group message naming one is
	// answered (its Telegram first name counts too).
	BotNames []string
	// ReplyProbability answers any other group message by chance, 0-1.
	ReplyProbability float64
}

func configure(fs *flag.FlagSet) func() (adapter.Adapter, error) {
	var c Config
	adapter.SecretString(fs, &c.Token, "telegram-token", "NEKRO_TELEGRAM_TOKEN", "Telegram bot token from @BotFather; turns the Telegram adapter on")
	fs.StringVar(&c.APIURL, "telegram-api-url", envOr("NEKRO_TELEGRAM_API_URL", DefaultAPIURL), "Telegram Bot API root, for a local Bot API server (env NEKRO_TELEGRAM_API_URL)")
	fs.StringVar(&c.WebhookURL, "telegram-webhook-url", os.Getenv("NEKRO_TELEGRAM_WEBHOOK_URL"), "Telegram webhook mode: the public HTTPS URL that reaches "+WebhookPath+" on nekro serve; empty: long polling (env NEKRO_TELEGRAM_WEBHOOK_URL)")
	adapter.ListFlag(fs, &c.Chats, "telegram-chats", "NEKRO_TELEGRAM_CHATS", "Telegram chat ids the bot reads and answers, comma-separated (a user's id for a private chat, a negative id for a group); empty: every chat")
	adapter.ListFlag(fs, &c.BotNames, "telegram-bot-names", "NEKRO_TELEGRAM_BOT_NAMES", "the bot's names, comma-separated: a Telegram group message naming one is answered")
	fs.Float64Var(&c.ReplyProbability, "telegram-reply-probability", envFloat("NEKRO_TELEGRAM_REPLY_PROBABILITY"), "chance (0-1) of answering a Telegram group message not addressed to the bot (env NEKRO_TELEGRAM_REPLY_PROBABILITY)")
	return func() (adapter.Adapter, error) {
		if c.Token == "" {
			if c.WebhookURL != "" {
				return nil, errors.New("--telegram-webhook-url needs the bot's token: set NEKRO_TELEGRAM_TOKEN")
			}
			return nil, nil
		}
		return New(c)
	}
}

// Adapter is the Telegram adapter.
type Adapter struct {
	cfg      Config
	rule     adapter.ReplyRule
	api      *client
	fileHost string
	secret   string // the webhook's secret token

	hostMu sync.Mutex
	host   adapter.Host
	runCtx context.Context

	mu      sync.Mutex
	me      botInfo
	status  adapter.Status
	admins  map[int64]cachedAdmins
	ignored map[string]bool
	seen    []int64 // the last webhook update ids, to drop a redelivery
}

// botInfo is what getMe says of the bot.
type botInfo struct {
	ID        int64  `json:"id"`
	FirstName string `json:"first_name"`
	Username  string `json:"username"`
}

func (b botInfo) names() []string {
	if b.FirstName == "" {
		return nil
	}
	return []string{b.FirstName}
}

// New checks c and returns an adapter for it.
func New(c Config) (*Adapter, error) {
	if strings.ContainsAny(c.Token, "/?# \t\n") {
		return nil, errors.New("--telegram-token: not a Bot API token (it looks like 123456789:AA...; @BotFather gives it)")
	}
	if c.APIURL == "" {
		c.APIURL = DefaultAPIURL
	}
	u, err := url.Parse(c.APIURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("--telegram-api-url %q: want http(s)://host[:port] (the Bot API's root, %s by default)", c.APIURL, DefaultAPIURL)
	}
	if c.WebhookURL != "" {
		w, err := url.Parse(c.WebhookURL)
		if err != nil || (w.Scheme != "https" && w.Scheme != "http") || w.Host == "" {
			return nil, fmt.Errorf("--telegram-webhook-url %q: want the public https:// URL that reaches %s on nekro serve", c.WebhookURL, WebhookPath)
		}
	}
	if c.ReplyProbability < 0 || c.ReplyProbability > 1 {
		return nil, fmt.Errorf("--telegram-reply-probability %v: want a number from 0 to 1", c.ReplyProbability)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	mac := hmac.New(sha256.New, []byte(c.Token))
	mac.Write([]byte("nekro telegram webhook"))
	a := &Adapter{cfg: c, rule: adapter.ReplyRule{Names: c.BotNames, Probability: c.ReplyProbability, Groups: c.Chats},
		api: &client{base: strings.TrimRight(c.APIURL, "/"), token: c.Token, http: &http.Client{}, maxRetryAfter: maxRetryAfter},
		// Downloads of files reach the API's own host, even a local Bot
		// API server on a private address; nothing else private.
		fileHost: net.JoinHostPort(u.Hostname(), port),
		secret:   hex.EncodeToString(mac.Sum(nil)),
		admins:   map[int64]cachedAdmins{}, ignored: map[string]bool{}}
	a.status = adapter.Status{Name: Platform, Mode: a.mode(), Remote: a.api.base}
	return a, nil
}

func (a *Adapter) mode() string {
	if a.cfg.WebhookURL != "" {
		return "webhook"
	}
	return "polling"
}

// Info describes the adapter.
func (a *Adapter) Info() adapter.Info {
	parts := []string{"token set", "Bot API " + a.api.base}
	if a.cfg.WebhookURL != "" {
		parts = append(parts, "webhook "+a.cfg.WebhookURL+" -> "+WebhookPath)
	} else {
		parts = append(parts, "long polling")
	}
	if len(a.cfg.Chats) > 0 {
		parts = append(parts, "chats "+strings.Join(a.cfg.Chats, ","))
	}
	if len(a.cfg.BotNames) > 0 {
		parts = append(parts, "names "+strings.Join(a.cfg.BotNames, ","))
	}
	parts = append(parts, fmt.Sprintf("reply probability %g", a.cfg.ReplyProbability))
	return adapter.Info{Platform: Platform, Settings: strings.Join(parts, "; "), FileHosts: []string{a.fileHost}}
}

// Routes mounts the webhook in webhook mode.
func (a *Adapter) Routes() map[string]http.Handler {
	if a.cfg.WebhookURL == "" {
		return nil
	}
	return map[string]http.Handler{"POST " + WebhookPath: http.HandlerFunc(a.webhook)}
}

// Run names the bot (getMe), then polls, or sets the webhook and serves
// it, until ctx ends.
func (a *Adapter) Run(ctx context.Context, h adapter.Host) error {
	if !a.identify(ctx, h) {
		return nil
	}
	if a.cfg.WebhookURL != "" {
		return a.serveWebhook(ctx, h)
	}
	a.poll(ctx, h)
	return nil
}

// identify calls getMe until it answers: a refused token is logged once
// (and again only when the error changes), other failures at each try;
// the waits double, up to ten minutes for a refused token and 30 s for
// the rest. It returns false when ctx ends first.
func (a *Adapter) identify(ctx context.Context, h adapter.Host) bool {
	backoff, last := time.Second, ""
	for {
		var me botInfo
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := a.api.call(cctx, "getMe", jsonBody(struct{}{}), &me)
		cancel()
		if err == nil {
			a.mu.Lock()
			a.me = me
			a.status.SelfID = strconv.FormatInt(me.ID, 10)
			a.mu.Unlock()
			h.Log().Info("Telegram bot signed in", "bot", "@"+me.Username, "id", me.ID, "mode", a.mode(), "api", a.api.base)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		limit := maxBackoff
		var ae *apiError
		if errors.As(err, &ae) && (ae.Code == http.StatusUnauthorized || ae.Code == http.StatusNotFound) {
			limit = maxAuthWait
		}
		a.setStatus(func(s *adapter.Status) { s.Connected, s.LastError = false, err.Error() })
		if err.Error() != last {
			h.Log().Error("Telegram getMe failed; the bot stays offline and tries again with growing waits", "err", err, "next_try_in", backoff)
			last = err.Error()
		}
		if !sleep(ctx, backoff) {
			return false
		}
		backoff = min(backoff*2, limit)
	}
}

// poll runs getUpdates until ctx ends.
func (a *Adapter) poll(ctx context.Context, h adapter.Host) {
	a.dropWebhook(ctx, h)
	var offset int64
	pending := false // updates handled whose offset Telegram has not been told yet
	defer func() {
		if pending {
			// Tell Telegram what was handled, so a restart does not
			// answer it again.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			a.api.call(cctx, "getUpdates", jsonBody(map[string]any{"offset": offset, "limit": 1, "timeout": 0}), nil)
			cancel()
		}
	}()
	backoff, up, everUp, lastErr := time.Second, false, false, ""
	for ctx.Err() == nil {
		var updates []update
		cctx, cancel := context.WithTimeout(ctx, pollTimeout+15*time.Second)
		err := a.api.call(cctx, "getUpdates", jsonBody(map[string]any{
			"offset": offset, "timeout": int(pollTimeout / time.Second), "allowed_updates": []string{"message"}}), &updates)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			a.setStatus(func(s *adapter.Status) {
				if s.Connected {
					s.Since = time.Now().UTC()
				}
				s.Connected, s.LastError = false, err.Error()
			})
			if up || err.Error() != lastErr {
				h.Log().Warn("Telegram polling failed; retrying", "in", backoff, "err", err)
			}
			up, lastErr = false, err.Error()
			if !sleep(ctx, backoff) {
				break
			}
			backoff = min(backoff*2, maxBackoff)
			continue
		}
		pending = false
		if !up {
			a.setStatus(func(s *adapter.Status) { s.Connected, s.Since = true, time.Now().UTC() })
			if everUp {
				h.Log().Info("Telegram polling resumed", "bot", "@"+a.bot().Username)
			} else {
				h.Log().Info("Telegram connected: long polling for updates", "bot", "@"+a.bot().Username)
			}
			up, everUp, backoff, lastErr = true, true, time.Second, ""
		}
		for _, u := range updates {
			if u.UpdateID < offset {
				continue // already handled
			}
			if ctx.Err() != nil {
				break // left unconfirmed: the next start handles it
			}
			a.handle(ctx, h, u)
			offset, pending = u.UpdateID+1, true
		}
	}
	a.setStatus(func(s *adapter.Status) { s.Connected, s.Since = false, time.Now().UTC() })
	h.Log().Info("Telegram polling stopped")
}

// dropWebhook removes a webhook an earlier run in webhook mode left set:
// while one is set, getUpdates answers 409.
func (a *Adapter) dropWebhook(ctx context.Context, h adapter.Host) {
	var info struct {
		URL string `json:"url"`
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if err := a.api.call(cctx, "getWebhookInfo", jsonBody(struct{}{}), &info); err != nil || info.URL == "" {
		return
	}
	h.Log().Info("Telegram: removing the webhook an earlier run set, to poll", "webhook", info.URL)
	if err := a.api.call(cctx, "deleteWebhook", jsonBody(struct{}{}), nil); err != nil {
		h.Log().Warn("Telegram deleteWebhook failed; polling will be refused (409) while the webhook stays", "err", err)
	}
}

// serveWebhook sets the webhook (again with backoff until it is taken),
// then lets webhook calls in until ctx ends.
func (a *Adapter) serveWebhook(ctx context.Context, h adapter.Host) error {
	backoff := time.Second
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := a.api.call(cctx, "setWebhook", jsonBody(map[string]any{"url": a.cfg.WebhookURL, "secret_token": a.secret,
			"allowed_updates": []string{"message"}, "max_connections": 1}), nil)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		a.setStatus(func(s *adapter.Status) { s.LastError = err.Error() })
		h.Log().Warn("Telegram setWebhook failed; retrying", "url", a.cfg.WebhookURL, "in", backoff, "err", err)
		if !sleep(ctx, backoff) {
			return nil
		}
		backoff = min(backoff*2, maxBackoff)
	}
	a.hostMu.Lock()
	a.host, a.runCtx = h, ctx
	a.hostMu.Unlock()
	a.setStatus(func(s *adapter.Status) { s.Connected, s.Since, s.LastError = true, time.Now().UTC(), "" })
	h.Log().Info("Telegram webhook set", "bot", "@"+a.bot().Username, "url", a.cfg.WebhookURL, "path", WebhookPath)
	<-ctx.Done()
	a.hostMu.Lock()
	a.host = nil
	a.hostMu.Unlock()
	a.setStatus(func(s *adapter.Status) { s.Connected, s.Since = false, time.Now().UTC() })
	h.Log().Info("Telegram webhook closed; Telegram keeps the updates until nekro is back")
	return nil
}

// webhook takes one update from Telegram. Updates are handled one at a
// time, in order (setWebhook asks for one connection); a redelivered one
// is acknowledged and dropped.
func (a *Adapter) webhook(w http.ResponseWriter, r *http.Request) {
	got := r.Header.Get("X-Telegram-Bot-Api-Secret-Token")
	if subtle.ConstantTimeCompare([]byte(got), []byte(a.secret)) != 1 {
		http.Error(w, "Telegram webhook: missing or wrong X-Telegram-Bot-Api-Secret-Token", http.StatusUnauthorized)
		return
	}
	a.hostMu.Lock()
	h, ctx := a.host, a.runCtx
	a.hostMu.Unlock()
	if h == nil {
		http.Error(w, "Telegram webhook: nekro is starting; try again", http.StatusServiceUnavailable)
		return
	}
	var u update
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<20)).Decode(&u); err != nil {
		http.Error(w, "Telegram webhook: the body is not an Update", http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	dup := false
	for _, id := range a.seen {
		dup = dup || id == u.UpdateID
	}
	if !dup {
		a.seen = append(a.seen, u.UpdateID)
		if len(a.seen) > 256 {
			a.seen = a.seen[1:]
		}
	}
	a.mu.Unlock()
	if !dup {
		a.handle(ctx, h, u)
	}
	w.WriteHeader(http.StatusOK)
}

func (a *Adapter) bot() botInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.me
}

func (a *Adapter) setStatus(f func(*adapter.Status)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f(&a.status)
}

// Status is the one connection: polling or the webhook.
func (a *Adapter) Status() []adapter.Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	return []adapter.Status{a.status}
}

// Check asks the Bot API who the bot is (getMe) and how its webhook
// stands (getWebhookInfo).
func (a *Adapter) Check(ctx context.Context) []adapter.Check {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var me botInfo
	if err := a.api.call(ctx, "getMe", jsonBody(struct{}{}), &me); err != nil {
		return []adapter.Check{{Detail: "getMe at " + a.api.base + ": " + err.Error()}}
	}
	out := []adapter.Check{{OK: true, Detail: fmt.Sprintf("bot @%s (id %d) answers getMe at %s", me.Username, me.ID, a.api.base)}}
	var info struct {
		URL              string `json:"url"`
		PendingUpdates   int    `json:"pending_update_count"`
		LastErrorMessage string `json:"last_error_message"`
	}
	if err := a.api.call(ctx, "getWebhookInfo", jsonBody(struct{}{}), &info); err != nil {
		return append(out, adapter.Check{Detail: "getWebhookInfo: " + err.Error()})
	}
	switch {
	case a.cfg.WebhookURL == "" && info.URL != "":
		out = append(out, adapter.Check{OK: true, Detail: "a webhook is set (" + info.URL + "); nekro serve removes it to poll"})
	case a.cfg.WebhookURL == "":
		out = append(out, adapter.Check{OK: true, Detail: fmt.Sprintf("long polling; %d updates waiting", info.PendingUpdates)})
	case info.LastErrorMessage != "":
		out = append(out, adapter.Check{Detail: fmt.Sprintf("webhook %q: Telegram's last delivery failed: %s (%d updates waiting)", info.URL, info.LastErrorMessage, info.PendingUpdates)})
	default:
		out = append(out, adapter.Check{OK: true, Detail: fmt.Sprintf("webhook %q as Telegram has it (nekro serve sets %s); %d updates waiting", info.URL, a.cfg.WebhookURL, info.PendingUpdates)})
	}
	return out
}

// sleep waits d, false when ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
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

var (
	_ adapter.Adapter = (*Adapter)(nil)
	_ adapter.Router  = (*Adapter)(nil)
	_ adapter.Checker = (*Adapter)(nil)
)
