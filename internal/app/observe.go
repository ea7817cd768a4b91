package app

import (
	"context"

	"github.com/nekro-go/nekro/internal/llm"
	"github.com/nekro-go/nekro/internal/metrics"
)

// observedModel counts a model's requests into the metrics: failures,
// and the tokens the endpoint reports. Only configured models are
// wrapped: llm.None stays itself (the agent recognises it).
type observedModel struct {
	llm.Model
	m *metrics.Metrics
}

func (o observedModel) Complete(ctx context.Context, msgs []llm.ChatMessage) (llm.Completion, error) {
	c, err := o.Model.Complete(ctx, msgs)
	o.m.ModelAnswered(err != nil, c.Usage.PromptTokens, c.Usage.CompletionTokens)
	return c, err
}
