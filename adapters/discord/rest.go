package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// userAgent is the form the documentation asks bots to send.
const userAgent = "DiscordBot (https://github.com/nekro-go/nekro, 1)"

// maxAttempts bounds the tries of one request that is rate-limited.
const maxAttempts = 5

// errUnauthorized marks an HTTP 401: the token was refused.
var errUnauthorized = errors.New("the bot token was refused")

// rest is a client of Discord's REST API that keeps each route's
// rate-limit state: it waits before a request whose route has no request
// left until the reset, and waits out a 429 and tries again.
type rest struct {
	base  string // without a trailing slash
	token string
	hc    *http.Client

	mu      sync.Mutex
	buckets map[string]bucket // route -> what the last response said
	global  time.Time         // no request before this (a global 429)
}

// bucket is a route's rate-limit state.
type bucket struct {
	remaining int
	reset     time.Time
}

// request is one REST call. route names its rate limit (method and path
// with the top-level id kept, e.g. "POST /channels/1/messages"); empty,
// it is the method and path.
type request struct {
	method, path, route string
	body                []byte
	contentType         string
}

func newREST(base, token string) *rest {
	return &rest{base: strings.TrimSuffix(base, "/"), token: token, buckets: map[string]bucket{},
		hc: &http.Client{Timeout: 2 * time.Minute}}
}

// apiError is a REST error response.
type apiError struct {
	Message string `json:"message"`
	Code    int    `json:"code"`
}

// do sends r and decodes the answer's JSON into out (when not nil).
func (c *rest) do(ctx context.Context, r request, out any) error {
	route := r.route
	if route == "" {
		route = r.method + " " + r.path
	}
	for attempt := 1; ; attempt++ {
		if err := c.waitTurn(ctx, route); err != nil {
			return fmt.Errorf("Discord %s: %w", route, err)
		}
		req, err := http.NewRequestWithContext(ctx, r.method, c.base+r.path, bytes.NewReader(r.body))
		if err != nil {
			return fmt.Errorf("Discord %s: %w", route, err)
		}
		req.Header.Set("Authorization", "Bot "+c.token)
		req.Header.Set("User-Agent", userAgent)
		if r.contentType != "" {
			req.Header.Set("Content-Type", r.contentType)
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			return fmt.Errorf("Discord %s: %w", route, err)
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("Discord %s: read the answer: %w", route, err)
		}
		c.note(route, resp.Header)
		switch {
		case resp.StatusCode == http.StatusTooManyRequests:
			wait := c.limited(route, resp.Header, body)
			if attempt == maxAttempts {
				return fmt.Errorf("Discord %s: still rate-limited after %d attempts (retry after %s)", route, attempt, wait)
			}
			continue
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			if out == nil || len(body) == 0 {
				return nil
			}
			if err := json.Unmarshal(body, out); err != nil {
				return fmt.Errorf("Discord %s: an answer that is not the documented JSON: %w", route, err)
			}
			return nil
		}
		var ae apiError
		json.Unmarshal(body, &ae)
		detail := fmt.Sprintf("HTTP %d", resp.StatusCode)
		if ae.Message != "" {
			detail += ": " + ae.Message
		}
		if ae.Code != 0 {
			detail += fmt.Sprintf(" (code %d)", ae.Code)
		}
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			return fmt.Errorf("Discord %s: %s: set --discord-token (NEKRO_DISCORD_TOKEN) to the token of the Developer Portal's Bot page: %w", route, detail, errUnauthorized)
		case http.StatusForbidden:
			return fmt.Errorf("Discord %s: %s: the bot lacks a permission in the channel (View Channel, Send Messages, Attach Files)", route, detail)
		}
		return fmt.Errorf("Discord %s: %s", route, detail)
	}
}

// waitTurn waits until route may be called: past a global limit, and
// past its bucket's reset when the last answer left no request.
func (c *rest) waitTurn(ctx context.Context, route string) error {
	for {
		c.mu.Lock()
		until := c.global
		if b, ok := c.buckets[route]; ok && b.remaining <= 0 && b.reset.After(until) {
			until = b.reset
		}
		c.mu.Unlock()
		wait := time.Until(until)
		if wait <= 0 {
			return nil
		}
		if dl, ok := ctx.Deadline(); ok && time.Now().Add(wait).After(dl) {
			return fmt.Errorf("rate-limited for %s, longer than the time left: %w", wait.Round(time.Millisecond), context.DeadlineExceeded)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		c.mu.Lock()
		if b, ok := c.buckets[route]; ok && !b.reset.After(time.Now()) {
			delete(c.buckets, route) // the window is over: the next answer says anew
		}
		c.mu.Unlock()
	}
}

// note keeps what an answer's X-RateLimit headers say of route.
func (c *rest) note(route string, h http.Header) {
	rem, err1 := strconv.Atoi(h.Get("X-RateLimit-Remaining"))
	after, err2 := strconv.ParseFloat(h.Get("X-RateLimit-Reset-After"), 64)
	if err1 != nil || err2 != nil {
		return
	}
	c.mu.Lock()
	c.buckets[route] = bucket{remaining: rem, reset: time.Now().Add(seconds(after))}
	c.mu.Unlock()
}

// limited takes a 429: its retry_after (the body's, else Retry-After or
// X-RateLimit-Reset-After), for the route or, when global, for all.
func (c *rest) limited(route string, h http.Header, body []byte) time.Duration {
	var b struct {
		RetryAfter float64 `json:"retry_after"`
		Global     bool    `json:"global"`
	}
	json.Unmarshal(body, &b)
	wait := seconds(b.RetryAfter)
	for _, hdr := range []string{"Retry-After", "X-RateLimit-Reset-After"} {
		if wait > 0 {
			break
		}
		if f, err := strconv.ParseFloat(h.Get(hdr), 64); err == nil {
			wait = seconds(f)
		}
	}
	if wait <= 0 {
		wait = time.Second
	}
	until := time.Now().Add(wait)
	c.mu.Lock()
	defer c.mu.Unlock()
	if b.Global || h.Get("X-RateLimit-Global") == "true" || h.Get("X-RateLimit-Scope") == "global" {
		c.global = until
	} else {
		c.buckets[route] = bucket{remaining: 0, reset: until}
	}
	return wait
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// gatewayBot is GET /gateway/bot's answer.
type gatewayBot struct {
	URL               string `json:"url"`
	SessionStartLimit struct {
		Total      int   `json:"total"`
		Remaining  int   `json:"remaining"`
		ResetAfter int64 `json:"reset_after"` // milliseconds
	} `json:"session_start_limit"`
}

func (c *rest) gatewayBot(ctx context.Context) (gatewayBot, error) {
	var gb gatewayBot
	if err := c.do(ctx, request{method: "GET", path: "/gateway/bot"}, &gb); err != nil {
		return gb, err
	}
	if gb.URL == "" {
		return gb, errors.New("Discord GET /gateway/bot: no url in the answer")
	}
	return gb, nil
}
