package satori

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// client calls the Satori HTTP API: POST <base>/v1/<resource>.<method>
// with a JSON body, the token as a Bearer credential, and the login's
// Satori-Platform and Satori-User-ID headers.
type client struct {
	base  string
	token string
	hc    *http.Client
}

func newClient(base, token string) *client {
	return &client{base: base, token: token, hc: &http.Client{Timeout: 2 * time.Minute}}
}

// call sends one API request for the login (platform, selfID) and
// decodes the answer's JSON into out (when not nil).
func (c *client) call(ctx context.Context, platform, selfID, method string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("Satori %s: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/"+method, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("Satori %s: %w", method, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Satori-Platform", platform)
	req.Header.Set("Satori-User-ID", selfID)
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("Satori %s: %w", method, scrub(err, c.token))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("Satori %s: read the answer: %w", method, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if out == nil || len(bytes.TrimSpace(body)) == 0 {
			return nil
		}
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("Satori %s: an answer that is not the protocol's JSON: %w", method, err)
		}
		return nil
	}
	detail := fmt.Sprintf("HTTP %d", resp.StatusCode)
	if t := strings.TrimSpace(string(body)); t != "" {
		if len(t) > 200 || !utf8.ValidString(t) {
			t = string([]rune(strings.ToValidUTF8(t, "?"))[:min(200, utf8.RuneCountInString(t))]) + "…"
		}
		detail += ": " + strings.ReplaceAll(t, c.token, "xxxxx")
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		return fmt.Errorf("Satori %s for %s:%s: %s: %w: %s", method, platform, selfID, detail, errRefused, tokenFix)
	case http.StatusForbidden:
		return fmt.Errorf("Satori %s for %s:%s: %s (a wrong token, or a login the server does not have: %s)", method, platform, selfID, detail, tokenFix)
	}
	return fmt.Errorf("Satori %s for %s:%s: %s", method, platform, selfID, detail)
}

// scrub keeps the token out of an error's text.
func scrub(err error, token string) error {
	if token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	return fmt.Errorf("%s", strings.ReplaceAll(err.Error(), token, "xxxxx"))
}
