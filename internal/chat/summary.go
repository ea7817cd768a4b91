package chat

// Summaries of chats' older history (HistorySummary), and the prompt
// context recorded with turns and runs.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// HistorySummaryOf returns the chat's kept summary, or nil when it has
// none.
func (s *Service) HistorySummaryOf(ctx context.Context, chatKey string) (*HistorySummary, error) {
	h := HistorySummary{ChatKey: chatKey}
	var at int64
	err := s.r.QueryRowContext(ctx, `SELECT through_id, covered, text, tokens, model_group, updated_at
		FROM chat_summaries WHERE chat_key = $1`, chatKey).Scan(&h.ThroughID, &h.Covered, &h.Text, &h.Tokens, &h.Group, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("summary of %s: %w", chatKey, err)
	}
	h.UpdatedAt = fromMicros(at)
	return &h, nil
}

// SaveHistorySummary keeps h as its chat's summary, in place of the one
// kept, unless that one covers as much or more (another process
// summarized meanwhile), or the message h covers through is gone (the
// chat was reset while h was written). It reports whether h was kept.
func (s *Service) SaveHistorySummary(ctx context.Context, h HistorySummary) (bool, error) {
	if h.UpdatedAt.IsZero() {
		h.UpdatedAt = time.Now().UTC().Truncate(time.Microsecond)
	}
	res, err := s.w.ExecContext(ctx, `INSERT INTO chat_summaries (chat_key, through_id, covered, text, tokens, model_group, updated_at)
		SELECT $1, CAST($2 AS BIGINT), CAST($3 AS BIGINT), $4, CAST($5 AS BIGINT), $6, CAST($7 AS BIGINT)
		WHERE EXISTS (SELECT 1 FROM chat_messages WHERE chat_key = $1 AND id = $2)
		ON CONFLICT (chat_key) DO UPDATE SET through_id = excluded.through_id, covered = excluded.covered,
			text = excluded.text, tokens = excluded.tokens, model_group = excluded.model_group, updated_at = excluded.updated_at
		WHERE excluded.through_id > chat_summaries.through_id`,
		h.ChatKey, h.ThroughID, h.Covered, h.Text, h.Tokens, h.Group, micros(h.UpdatedAt))
	if err != nil {
		return false, fmt.Errorf("keep the summary of %s: %w", h.ChatKey, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("keep the summary of %s: %w", h.ChatKey, err)
	}
	return n > 0, nil
}

// contextColumn is c as stored: JSON, or "" for none.
func contextColumn(c *PromptContext) string {
	if c == nil {
		return ""
	}
	b, err := json.Marshal(c)
	if err != nil {
		return ""
	}
	return string(b)
}

// contextOf reads a stored prompt context; nil for none (or one that
// does not decode: it is a record for people, not state).
func contextOf(col string) *PromptContext {
	if col == "" {
		return nil
	}
	var c PromptContext
	if json.Unmarshal([]byte(col), &c) != nil {
		return nil
	}
	return &c
}
