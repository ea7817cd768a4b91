package qqbot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// errRefused marks credentials the platform refused: a wrong app id or
// secret, or a token it does not accept.
var errRefused = errors.New("refused")

// Token tuning. The platform hands out a new token only in the last 60
// seconds of the old one's life (the old one stays valid meanwhile), so
// a token is renewed 50 seconds before it expires, or after three
// quarters of its life when that is shorter.
const (
	renewBefore   = 50 * time.Second
	refusedPause  = 10 * time.Second // no new request this soon after a refusal
	tokenTimeout  = 20 * time.Second
	minRenewSleep = 200 * time.Millisecond
)

// token is an access token and when to renew it.
type token struct {
	value   string
	expires time.Time
	renew   time.Time
}

// tokenSource gets access tokens from the app id and secret (POST
// {appId, clientSecret} to the token endpoint, answered with
// access_token and expires_in) and keeps the current one.
type tokenSource struct {
	url, appID, secret string
	hc                 *http.Client

	fetching sync.Mutex // one request at a time; the others wait for its token
	mu       sync.Mutex
	cur      token
	lastErr  error     // the last request's refusal
	lastAt   time.Time // when it was refused
}

func newTokenSource(url, appID, secret string) *tokenSource {
	return &tokenSource{url: url, appID: appID, secret: secret, hc: &http.Client{Timeout: tokenTimeout}}
}

// get returns a token valid now, asking for a new one when the current
// one is due for renewal.
func (ts *tokenSource) get(ctx context.Context) (string, error) {
	if t, ok := ts.fresh(); ok {
		return t.value, nil
	}
	ts.fetching.Lock()
	defer ts.fetching.Unlock()
	if t, ok := ts.fresh(); ok { // another caller renewed it meanwhile
		return t.value, nil
	}
	ts.mu.Lock()
	lastErr, lastAt, cur := ts.lastErr, ts.lastAt, ts.cur
	ts.mu.Unlock()
	if lastErr != nil && time.Since(lastAt) < refusedPause {
		return "", lastErr
	}
	t, err := ts.fetch(ctx)
	if err != nil {
		if cur.value != "" && time.Now().Before(cur.expires) {
			return cur.value, nil // still valid: renew on a later call
		}
		return "", err
	}
	return t.value, nil
}

// forget drops tok, which the platform refused, so the next call asks
// for a new token instead of trusting its expiry.
func (ts *tokenSource) forget(tok string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.cur.value == tok {
		ts.cur = token{}
	}
}

// fresh is the current token when it is not yet due for renewal.
func (ts *tokenSource) fresh() (token, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.cur, ts.cur.value != "" && time.Now().Before(ts.cur.renew)
}

// fetch asks the token endpoint for a token and keeps it.
func (ts *tokenSource) fetch(ctx context.Context) (token, error) {
	t, err := ts.request(ctx)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if err != nil {
		if errors.Is(err, errRefused) {
			ts.lastErr, ts.lastAt = err, time.Now()
		}
		return token{}, err
	}
	ts.cur, ts.lastErr = t, nil
	return t, nil
}

func (ts *tokenSource) request(ctx context.Context) (token, error) {
	body, _ := json.Marshal(map[string]string{"appId": ts.appID, "clientSecret": ts.secret})
	req, err := http.NewRequestWithContext(ctx, "POST", ts.url, bytes.NewReader(body))
	if err != nil {
		return token{}, fmt.Errorf("QQ bot access token: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := ts.hc.Do(req)
	if err != nil {
		return token{}, fmt.Errorf("QQ bot access token: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return token{}, fmt.Errorf("QQ bot access token: read the answer: %w", err)
	}
	var ans struct {
		AccessToken string          `json:"access_token"`
		ExpiresIn   json.RawMessage `json:"expires_in"` // a number, or a string as the documentation's example shows
		Code        int             `json:"code"`
		Message     string          `json:"message"`
	}
	jerr := json.Unmarshal(b, &ans)
	if resp.StatusCode >= 500 {
		return token{}, fmt.Errorf("QQ bot access token: HTTP %d", resp.StatusCode)
	}
	if jerr != nil {
		return token{}, fmt.Errorf("QQ bot access token: HTTP %d: an answer that is not the documented JSON", resp.StatusCode)
	}
	if ans.AccessToken == "" || resp.StatusCode != http.StatusOK {
		detail := fmt.Sprintf("HTTP %d", resp.StatusCode)
		if ans.Code != 0 || ans.Message != "" {
			detail += fmt.Sprintf(": code %d: %s", ans.Code, ans.Message)
		}
		return token{}, fmt.Errorf("QQ bot access token: %s: check --qqbot-app-id (NEKRO_QQBOT_APP_ID) and NEKRO_QQBOT_SECRET against the AppID and AppSecret "+
			"of the bot's 开发设置 page, and that this machine's IP is on the bot's IP allow list there: %w", detail, errRefused)
	}
	secs, err := strconv.ParseFloat(string(bytes.Trim(ans.ExpiresIn, `"`)), 64)
	if err != nil || secs <= 0 {
		return token{}, fmt.Errorf("QQ bot access token: expires_in %s is not a number of seconds", ans.ExpiresIn)
	}
	life := time.Duration(secs * float64(time.Second))
	now := time.Now()
	return token{value: ans.AccessToken, expires: now.Add(life), renew: now.Add(life - min(renewBefore, life/4))}, nil
}

// keepFresh renews the current token when it is due, so a token is
// ready before the old one expires even when nothing is sent, until ctx
// ends. It asks for no first token: Run's connection does.
func (ts *tokenSource) keepFresh(ctx context.Context, log *slog.Logger) {
	backoff := time.Second
	for {
		ts.mu.Lock()
		cur := ts.cur
		ts.mu.Unlock()
		wait := time.Second
		if cur.value != "" {
			wait = max(time.Until(cur.renew), minRenewSleep)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if cur.value == "" || time.Now().Before(cur.renew) {
			continue
		}
		ts.fetching.Lock()
		_, err := ts.fetch(ctx)
		ts.fetching.Unlock()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("QQ bot access token not renewed; retrying", "err", err, "in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, maxBackoff)
			continue
		}
		backoff = time.Second
		log.Debug("QQ bot access token renewed")
	}
}
