package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// client calls the Bot API: POST <base>/bot<token>/<method> with a JSON
// or multipart body; every answer is {"ok", "result"} or {"ok": false,
// "error_code", "description", "parameters"}. The token is in the URL's
// path, so no error it returns carries the URL: transport errors are
// unwrapped from url.Error and the token is replaced in whatever text
// remains.
type client struct {
	base  string // the API's root, without a trailing slash
	token string
	http  *http.Client
	// maxRetryAfter bounds how long one call waits for a 429's
	// retry_after before it gives up (and the caller retries later).
	maxRetryAfter time.Duration
}

// apiError is the Bot API's refusal of a call.
type apiError struct {
	Method      string
	Code        int    // error_code, the HTTP status
	Description string // the API's words
	RetryAfter  int    // parameters.retry_after, seconds (429)
	MigrateTo   int64  // parameters.migrate_to_chat_id (a group became a supergroup)
}

func (e *apiError) Error() string {
	msg := fmt.Sprintf("telegram %s: HTTP %d: %s", e.Method, e.Code, e.Description)
	switch {
	case e.Code == http.StatusUnauthorized || (e.Code == http.StatusNotFound && e.Method == "getMe"):
		msg += " (the Bot API refused the token: check --telegram-token / NEKRO_TELEGRAM_TOKEN against the one @BotFather gave)"
	case e.Code == http.StatusConflict && strings.Contains(e.Description, "webhook"):
		msg += " (a webhook is set for this bot, by another program since nekro removes its own: Telegram does not serve getUpdates then)"
	case e.Code == http.StatusConflict:
		msg += " (another program polls this bot's updates: Telegram serves one poller per bot; stop the other nekro or program using the token)"
	}
	return msg
}

// envelope is every Bot API answer.
type envelope struct {
	OK          bool            `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Parameters  struct {
		RetryAfter      int   `json:"retry_after"`
		MigrateToChatID int64 `json:"migrate_to_chat_id"`
	} `json:"parameters"`
}

// body makes one request's body; called again for each retry.
type body func() (io.Reader, string, error)

// jsonBody sends params as JSON.
func jsonBody(params any) body {
	return func() (io.Reader, string, error) {
		b, err := json.Marshal(params)
		if err != nil {
			return nil, "", err
		}
		return bytes.NewReader(b), "application/json", nil
	}
}

// multipartBody sends fields and one file (field name, file name,
// content from open) as multipart/form-data, streamed.
func multipartBody(fields map[string]string, fileField, fileName string, open func() (io.ReadCloser, error)) body {
	return func() (io.Reader, string, error) {
		r, err := open()
		if err != nil {
			return nil, "", err
		}
		pr, pw := io.Pipe()
		mw := multipart.NewWriter(pw)
		go func() {
			defer r.Close()
			for k, v := range fields {
				if err := mw.WriteField(k, v); err != nil {
					pw.CloseWithError(err)
					return
				}
			}
			part, err := mw.CreateFormFile(fileField, fileName)
			if err == nil {
				_, err = io.Copy(part, r)
			}
			if err == nil {
				err = mw.Close()
			}
			pw.CloseWithError(err)
		}()
		return pr, mw.FormDataContentType(), nil
	}
}

// call runs method and decodes its result into out (nil: ignored). A 429
// is waited out (its retry_after, at most maxRetryAfter in all) and the
// call made again.
func (c *client) call(ctx context.Context, method string, b body, out any) error {
	waited := time.Duration(0)
	for {
		err := c.once(ctx, method, b, out)
		var ae *apiError
		if !errors.As(err, &ae) || ae.Code != http.StatusTooManyRequests {
			return err
		}
		wait := time.Duration(max(ae.RetryAfter, 1)) * time.Second
		if waited+wait > c.maxRetryAfter {
			return fmt.Errorf("%w (waited %s already; giving up on this call)", err, waited)
		}
		waited += wait
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (while waiting %s for the rate limit)", ctx.Err(), wait)
		case <-time.After(wait):
		}
	}
}

func (c *client) once(ctx context.Context, method string, b body, out any) error {
	rd, ctype, err := b()
	if err != nil {
		return fmt.Errorf("telegram %s: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/bot"+c.token+"/"+method, rd)
	if err != nil {
		return fmt.Errorf("telegram %s: %w", method, c.scrub(err))
	}
	req.Header.Set("Content-Type", ctype)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("telegram %s: %w", method, c.scrub(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("telegram %s: read the answer: %w", method, c.scrub(err))
	}
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return fmt.Errorf("telegram %s: HTTP %s with an answer that is not the Bot API's JSON (is --telegram-api-url the Bot API?)", method, resp.Status)
	}
	if !env.OK {
		code := env.ErrorCode
		if code == 0 {
			code = resp.StatusCode
		}
		return &apiError{Method: method, Code: code, Description: c.hide(env.Description),
			RetryAfter: env.Parameters.RetryAfter, MigrateTo: env.Parameters.MigrateToChatID}
	}
	if out != nil {
		if err := json.Unmarshal(env.Result, out); err != nil {
			return fmt.Errorf("telegram %s: unexpected result: %w", method, err)
		}
	}
	return nil
}

// fileURL is where a file getFile described is downloaded.
func (c *client) fileURL(filePath string) string {
	return c.base + "/file/bot" + c.token + "/" + strings.TrimPrefix(filePath, "/")
}

// scrub drops the URL url.Error repeats (it holds the token) and hides
// the token in what is left, keeping what err matches (errors.Is).
func (c *client) scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if msg := err.Error(); c.hide(msg) != msg {
		return &scrubbed{msg: c.hide(msg), err: err}
	}
	return err
}

// hide replaces the token in s.
func (c *client) hide(s string) string {
	if c.token == "" {
		return s
	}
	s = strings.ReplaceAll(s, c.token, "xxxxx")
	return strings.ReplaceAll(s, url.PathEscape(c.token), "xxxxx")
}

type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }
