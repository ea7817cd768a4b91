package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Probe sends one request asking for a single token (max_tokens 1), once,
// without retries, and returns what the endpoint answered: a check that
// the URL, the model and the key work, for `nekro doctor`, costing as
// little as a request can. Its error is the same a turn would get.
func (c *Client) Probe(ctx context.Context) (Completion, error) {
	body, err := json.Marshal(struct {
		Model     string        `json:"model"`
		Messages  []ChatMessage `json:"messages"`
		MaxTokens int           `json:"max_tokens"`
	}{c.cfg.Model, []ChatMessage{TextMessage("user", "Reply with OK.")}, 1})
	if err != nil {
		return Completion{}, fmt.Errorf("encode request: %w", err)
	}
	start := time.Now()
	once := c.cfg
	once.MaxRetries = 0
	var comp Completion
	if _, err := post(ctx, once, c.http, c.endpoint, body, "model request", func(raw []byte) (err error) {
		comp, err = c.parseCompletion(raw)
		return err
	}); err != nil {
		return Completion{}, err
	}
	comp.Attempts, comp.Duration = 1, time.Since(start)
	return comp, nil
}
