// Package llm is the client of an OpenAI-compatible chat-completions API:
// the model the agent asks for code. When none is configured, None is the
// model: it answers every request with the reason.
package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nekro-go/nekro/plugin"
)

// Environment variables that configure the model.
const (
	EnvBaseURL = "NEKRO_LLM_BASE_URL"
	EnvAPIKey  = "NEKRO_LLM_API_KEY"
	EnvModel   = "NEKRO_LLM_MODEL"
)

// Config names an OpenAI-compatible chat-completions endpoint.
type Config struct {
	// BaseURL is the API root, e.g. "https://api.openai.com/v1" or
	// "http://127.0.0.1:11434/v1"; "/chat/completions" is appended unless
	// the URL already ends with it.
	BaseURL string
	APIKey  string // sent as a bearer token; may be empty for local servers
	Model   string
	// Timeout bounds one request, from sending to the last byte of the
	// answer; default 3 minutes.
	Timeout time.Duration
	// MaxRetries is how many times a request is repeated after a 429, a
	// 5xx or a network error; default 3. Negative means none.
	MaxRetries int
	// RetryBase is the first backoff; it doubles each retry (with jitter),
	// up to 20 s, unless the server sends Retry-After. Default 500 ms.
	RetryBase time.Duration
	// HTTPClient overrides the client used (its Timeout is ignored).
	HTTPClient *http.Client

	// Sampling settings sent with every request when set.
	Temperature *float64
	TopP        *float64
	MaxTokens   int
	// Extra holds further request fields, sent as they are (e.g.
	// "presence_penalty", "stop"); they cannot replace "model" or
	// "messages".
	Extra map[string]json.RawMessage

	// ContextWindow is how many tokens the model reads in one request,
	// its answer included (0: DefaultContextWindow). It is not sent: the
	// agent builds each prompt within it (MaxTokens, when set, is kept
	// free for the answer).
	ContextWindow int
}

// ConfigFromEnv reads NEKRO_LLM_BASE_URL, NEKRO_LLM_API_KEY and
// NEKRO_LLM_MODEL.
func ConfigFromEnv() Config {
	return Config{BaseURL: os.Getenv(EnvBaseURL), APIKey: os.Getenv(EnvAPIKey), Model: os.Getenv(EnvModel)}
}

// ErrNoModel is returned when a turn is asked for but no model is
// configured. Its text says how to configure one.
var ErrNoModel = errors.New("no language model is configured: set " + EnvBaseURL +
	" (an OpenAI-compatible API root such as https://api.openai.com/v1), " + EnvModel +
	" and, if the endpoint needs one, " + EnvAPIKey + ", then restart `nekro serve`; or add a model group" +
	" on the web UI's Models page (PUT /api/models), which needs no restart" +
	" (the playground, POST /api/chats/{chat}/exec, works without a model)")

// Check reports whether c names a usable endpoint.
func (c Config) Check() error {
	if c.BaseURL == "" && c.Model == "" {
		return ErrNoModel
	}
	if c.BaseURL == "" {
		return fmt.Errorf("%s is set but %s is not: %w", EnvModel, EnvBaseURL, ErrNoModel)
	}
	if c.Model == "" {
		return fmt.Errorf("%s is set but %s is not: %w", EnvBaseURL, EnvModel, ErrNoModel)
	}
	if !strings.HasPrefix(c.BaseURL, "http://") && !strings.HasPrefix(c.BaseURL, "https://") {
		return fmt.Errorf("%s %q is not an http(s) URL", EnvBaseURL, c.BaseURL)
	}
	return nil
}

// ChatMessage is one message of a chat-completions request.
type ChatMessage struct {
	Role    string  `json:"role"` // "system", "user" or "assistant"
	Content Content `json:"content"`
}

// Content is a message's content: plain text, or parts (text and images)
// for a multimodal message.
type Content struct {
	Text  string
	Parts []plugin.ContentPart
}

// MarshalJSON encodes parts as a list and text as a string.
func (c Content) MarshalJSON() ([]byte, error) {
	if c.Parts != nil {
		return json.Marshal(c.Parts)
	}
	return json.Marshal(c.Text)
}

// UnmarshalJSON accepts a string or a list of parts.
func (c *Content) UnmarshalJSON(b []byte) error {
	*c = Content{}
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("[")) {
		return json.Unmarshal(b, &c.Parts)
	}
	return json.Unmarshal(b, &c.Text)
}

// String returns the text of the content, parts' texts joined.
func (c Content) String() string {
	if c.Parts == nil {
		return c.Text
	}
	var texts []string
	for _, p := range c.Parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// TextMessage returns a message with plain text content.
func TextMessage(role, text string) ChatMessage {
	return ChatMessage{Role: role, Content: Content{Text: text}}
}

// Completion is the model's answer to one request.
type Completion struct {
	Text string
	// Group is the model group that answered, when the request went
	// through a Router; "" for a plain Client.
	Group    string
	Attempts int           // requests sent, retries included
	Duration time.Duration // from the first attempt to the answer
	Usage    Usage
}

// Usage is the token count the endpoint reported, if any.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// Model answers chat-completions requests. Client is the real one.
type Model interface {
	Complete(ctx context.Context, msgs []ChatMessage) (Completion, error)
}

// Client talks to an OpenAI-compatible chat-completions endpoint.
type Client struct {
	cfg      Config
	endpoint string
	http     *http.Client
}

// NewClient checks cfg and returns a client.
func NewClient(cfg Config) (*Client, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 3 * time.Minute
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 3
	}
	if cfg.MaxRetries < 0 {
		cfg.MaxRetries = 0
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = 500 * time.Millisecond
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	endpoint := strings.TrimRight(cfg.BaseURL, "/")
	if !strings.HasSuffix(endpoint, "/chat/completions") {
		endpoint += "/chat/completions"
	}
	return &Client{cfg: cfg, endpoint: endpoint, http: hc}, nil
}

// Model returns the configured model name.
func (c *Client) Model() string { return c.cfg.Model }

// Endpoint returns the chat-completions URL requests go to.
func (c *Client) Endpoint() string { return c.endpoint }

type completionRequest struct {
	Model       string        `json:"model"`
	Messages    []ChatMessage `json:"messages"`
	Temperature *float64      `json:"temperature,omitempty"`
	TopP        *float64      `json:"top_p,omitempty"`
	MaxTokens   int           `json:"max_tokens,omitempty"`
}

// requestBody encodes msgs as c's request: model, messages, sampling
// settings, then the extra fields that do not clash with those.
func (c *Client) requestBody(msgs []ChatMessage) ([]byte, error) {
	body, err := json.Marshal(completionRequest{Model: c.cfg.Model, Messages: msgs,
		Temperature: c.cfg.Temperature, TopP: c.cfg.TopP, MaxTokens: c.cfg.MaxTokens})
	if err != nil || len(c.cfg.Extra) == 0 {
		return body, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, err
	}
	for k, v := range c.cfg.Extra {
		if _, set := fields[k]; !set {
			fields[k] = v
		}
	}
	return json.Marshal(fields)
}

type completionResponse struct {
	Choices []struct {
		Message struct {
			Content *string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage Usage `json:"usage"`
}

// statusError is a non-2xx answer.
type statusError struct {
	code       int
	msg        string
	retryAfter time.Duration
}

func (e *statusError) Error() string {
	s := fmt.Sprintf("model endpoint answered %d %s", e.code, http.StatusText(e.code))
	if e.msg != "" {
		s += ": " + e.msg
	}
	switch e.code {
	case http.StatusUnauthorized, http.StatusForbidden:
		s += " (check " + EnvAPIKey + ")"
	case http.StatusNotFound:
		s += " (check " + EnvBaseURL + " and " + EnvModel + ")"
	}
	return s
}

func retryable(err error) bool {
	var se *statusError
	if errors.As(err, &se) {
		return se.code == http.StatusTooManyRequests || se.code >= 500
	}
	// Network errors and timeouts of one attempt; a cancelled caller is
	// checked separately.
	return true
}

// Complete sends msgs and returns the model's reply, retrying with backoff
// on 429, 5xx and network errors.
func (c *Client) Complete(ctx context.Context, msgs []ChatMessage) (Completion, error) {
	body, err := c.requestBody(msgs)
	if err != nil {
		return Completion{}, fmt.Errorf("encode request: %w", err)
	}
	start := time.Now()
	var comp Completion
	attempts, err := post(ctx, c.cfg, c.http, c.endpoint, body, "model request", func(raw []byte) (err error) {
		comp, err = c.parseCompletion(raw)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return Completion{}, err
		}
		return Completion{Attempts: attempts, Duration: time.Since(start)}, err // what the failure cost
	}
	comp.Attempts, comp.Duration = attempts, time.Since(start)
	return comp, nil
}

// parseCompletion decodes a chat-completions answer.
func (c *Client) parseCompletion(raw []byte) (Completion, error) {
	var cr completionResponse
	if err := json.Unmarshal(raw, &cr); err != nil {
		return Completion{}, fmt.Errorf("answer is not a chat completion: %w", err)
	}
	if len(cr.Choices) == 0 || cr.Choices[0].Message.Content == nil {
		return Completion{}, fmt.Errorf("answer has no message content (is %s a chat-completions endpoint?)", c.endpoint)
	}
	return Completion{Text: *cr.Choices[0].Message.Content, Usage: cr.Usage}, nil
}

// post sends body to endpoint and hands the 2xx answer's body to parse,
// retrying with backoff on 429, 5xx, network errors and answers parse
// refuses, as cfg says; it returns the number of requests sent. what
// names the request in errors.
func post(ctx context.Context, cfg Config, hc *http.Client, endpoint string, body []byte, what string, parse func(raw []byte) error) (int, error) {
	var last error
	sent := 0
	for attempt := 0; ; attempt++ {
		sent++
		raw, err := postOnce(ctx, cfg, hc, endpoint, body)
		if err == nil {
			err = parse(raw)
		}
		if err == nil {
			return sent, nil
		}
		last = err
		if ctx.Err() != nil {
			return sent, fmt.Errorf("%s: %w", what, ctx.Err())
		}
		if !retryable(err) || attempt >= cfg.MaxRetries {
			break
		}
		wait := cfg.RetryBase << attempt
		wait = wait/2 + rand.N(wait/2+1)
		var se *statusError
		if errors.As(err, &se) && se.retryAfter > 0 {
			wait = se.retryAfter
		}
		wait = min(wait, 20*time.Second)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return sent, fmt.Errorf("%s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
	if cfg.MaxRetries > 0 && retryable(last) {
		return sent, fmt.Errorf("%s failed %d times, last: %w", what, cfg.MaxRetries+1, last)
	}
	return sent, fmt.Errorf("%s: %w", what, last)
}

// postOnce sends one request; a non-2xx answer is a *statusError.
func postOnce(ctx context.Context, cfg Config, hc *http.Client, endpoint string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		se := &statusError{code: resp.StatusCode, msg: errorText(raw)}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
			se.retryAfter = time.Duration(s) * time.Second
		}
		return nil, se
	}
	return raw, nil
}

// errorText pulls the message out of an OpenAI-style error body, or a
// short prefix of the body.
func errorText(raw []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error != nil {
		var obj struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &obj) == nil && obj.Message != "" {
			return obj.Message
		}
		var s string
		if json.Unmarshal(e.Error, &s) == nil && s != "" {
			return s
		}
	}
	s := strings.TrimSpace(string(raw))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// None is the model when none is configured: every request fails with
// Reason (ErrNoModel, or what is wrong with the configuration).
type None struct{ Reason error }

// Complete returns the reason there is no model.
func (n None) Complete(context.Context, []ChatMessage) (Completion, error) {
	return Completion{}, n.Reason
}

// TokensVar reads a count of tokens from a variable (NEKRO_LLM_*_CONTEXT_WINDOW,
// NEKRO_LLM_*_MAX_TOKENS): "" is 0 (the default), a value that is not a
// whole number -1, which the model groups' check refuses, naming the group.
func TokensVar(v string) int {
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// groupEnv matches NEKRO_LLM_<GROUP>_MODEL, a model group's model.
var groupEnv = regexp.MustCompile(`^NEKRO_LLM_([A-Z0-9_]+)_MODEL$`)

// GroupsFromEnv reads the operator's model groups besides "chat" (the
// turns' model, NEKRO_LLM_*): each NEKRO_LLM_<GROUP>_MODEL names a group,
// e.g. NEKRO_LLM_VISION_MODEL the group "vision", with its own
// NEKRO_LLM_<GROUP>_BASE_URL and NEKRO_LLM_<GROUP>_API_KEY, or chat's
// endpoint (and key, only for that same endpoint) when they are unset,
// and NEKRO_LLM_<GROUP>_CONTEXT_WINDOW and NEKRO_LLM_<GROUP>_MAX_TOKENS.
func GroupsFromEnv(chat Config) map[string]Config {
	vars := map[string]string{}
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		vars[name] = value
	}
	return GroupsFrom(chat, vars)
}

// GroupsFrom is GroupsFromEnv over vars, variables by name, for a caller
// that layers them from more than the environment (a config file).
func GroupsFrom(chat Config, vars map[string]string) map[string]Config {
	out := map[string]Config{}
	for name, model := range vars {
		m := groupEnv.FindStringSubmatch(name)
		if m == nil || model == "" {
			continue
		}
		g := m[1]
		c := Config{BaseURL: vars["NEKRO_LLM_"+g+"_BASE_URL"], APIKey: vars["NEKRO_LLM_"+g+"_API_KEY"], Model: model,
			ContextWindow: TokensVar(vars["NEKRO_LLM_"+g+"_CONTEXT_WINDOW"]), MaxTokens: TokensVar(vars["NEKRO_LLM_"+g+"_MAX_TOKENS"])}
		if c.BaseURL == "" || c.BaseURL == chat.BaseURL {
			c.BaseURL = chat.BaseURL
			if c.APIKey == "" {
				c.APIKey = chat.APIKey
			}
		}
		out[strings.ToLower(g)] = c
	}
	return out
}
