package qqbot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// rest is a client of the platform's OpenAPI: JSON in and out, with
// "Authorization: QQBot <access token>".
type rest struct {
	base   string // without a trailing slash
	tokens *tokenSource
	hc     *http.Client
}

func newREST(base string, tokens *tokenSource) *rest {
	// The documentation asks for at least 5 s on message sends, lest a
	// message sent be taken for a failure; uploads take longer.
	return &rest{base: strings.TrimSuffix(base, "/"), tokens: tokens, hc: &http.Client{Timeout: 2 * time.Minute}}
}

// apiError is an OpenAPI error answer.
type apiError struct {
	Route   string
	Status  int
	Code    int    `json:"code"`
	Message string `json:"message"`
	TraceID string `json:"trace_id"`
}

// Codes of the OpenAPI's errors that mean something to nekro.
const (
	codeReplyExpired   = 304027 // the message replied to is too old
	codeRateLimited    = 22009
	codeURLNotAllowed  = 304003
	codeTokenNotPassed = 11243
	codeTokenFailed    = 11244
)

func (e *apiError) Error() string {
	msg := fmt.Sprintf("QQ bot %s: HTTP %d", e.Route, e.Status)
	if e.Code != 0 || e.Message != "" {
		msg += fmt.Sprintf(": code %d: %s", e.Code, e.Message)
	}
	switch e.Code {
	case codeReplyExpired:
		msg += " (the platform's reply window for the user's message closed)"
	case codeURLNotAllowed:
		msg += " (the text holds a URL whose domain is not configured for the bot: the platform's 开发设置, 消息URL配置)"
	case codeRateLimited:
		msg += " (too many messages: the platform allows 5 replies to one message)"
	}
	if e.Status == http.StatusUnauthorized {
		msg += " (the access token was refused: check --qqbot-app-id and NEKRO_QQBOT_SECRET)"
	}
	if e.TraceID != "" {
		msg += " (trace " + e.TraceID + ")"
	}
	return msg
}

func (e *apiError) Unwrap() error {
	if e.Status == http.StatusUnauthorized || e.Code == codeTokenNotPassed || e.Code == codeTokenFailed {
		return errRefused
	}
	return nil
}

// do sends method path with in as JSON (when not nil) and decodes the
// answer's JSON into out (when not nil).
func (c *rest) do(ctx context.Context, method, path string, in, out any) error {
	route := method + " " + path
	tok, err := c.tokens.get(ctx)
	if err != nil {
		return err
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("QQ bot %s: %w", route, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("QQ bot %s: %w", route, err)
	}
	req.Header.Set("Authorization", "QQBot "+tok)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("QQ bot %s: %w", route, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("QQ bot %s: read the answer: %w", route, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		ae := &apiError{Route: route, Status: resp.StatusCode}
		json.Unmarshal(b, ae)
		return c.refused(tok, ae)
	}
	// Some refusals come as HTTP 200 with a code.
	var ae apiError
	if json.Unmarshal(b, &ae) == nil && ae.Code != 0 && ae.Message != "" {
		ae.Route, ae.Status = route, resp.StatusCode
		return c.refused(tok, &ae)
	}
	if out == nil || len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("QQ bot %s: an answer that is not the documented JSON: %w", route, err)
	}
	return nil
}

// refused forgets the token an error says the platform refused.
func (c *rest) refused(tok string, ae *apiError) error {
	if errors.Is(ae, errRefused) {
		c.tokens.forget(tok)
	}
	return ae
}

// gateway is GET /gateway's url: where to dial the WebSocket.
func (c *rest) gateway(ctx context.Context) (string, error) {
	var g struct {
		URL string `json:"url"`
	}
	if err := c.do(ctx, "GET", "/gateway", nil, &g); err != nil {
		return "", err
	}
	if g.URL == "" {
		return "", errors.New("QQ bot GET /gateway: no url in the answer")
	}
	return g.URL, nil
}
