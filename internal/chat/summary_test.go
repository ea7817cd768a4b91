package chat_test

import (
	"context"
	"testing"

	"github.com/nekro-go/nekro/internal/chat"
)

// A chat's summary is kept, replaced only by one covering more, never
// kept for messages a reset deleted, and erased by the reset; the prompt
// context travels with the turn's and the run's records.
func TestHistorySummaryKeptAndReset(t *testing.T) {
	forEachDB(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		s, reopen := open(t, kind)
		var ids []int64
		for _, text := range []string{"one", "two", "three"} {
			m, err := s.AddMessage(ctx, userMsg("c", text))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, m.ID)
		}
		if h, err := s.HistorySummaryOf(ctx, "c"); err != nil || h != nil {
			t.Fatalf("no summary yet: %+v %v", h, err)
		}
		if ok, err := s.SaveHistorySummary(ctx, chat.HistorySummary{ChatKey: "c", ThroughID: ids[1], Covered: 2, Text: "one, two", Tokens: 3, Group: "chat"}); err != nil || !ok {
			t.Fatalf("save: %v %v", ok, err)
		}
		if ok, err := s.SaveHistorySummary(ctx, chat.HistorySummary{ChatKey: "c", ThroughID: ids[0], Covered: 1, Text: "one"}); err != nil || ok {
			t.Fatalf("a summary covering less replaced the kept one: %v %v", ok, err)
		}
		h, err := reopen().HistorySummaryOf(ctx, "c")
		if err != nil || h == nil || h.ThroughID != ids[1] || h.Covered != 2 || h.Text != "one, two" || h.Tokens != 3 || h.Group != "chat" || h.UpdatedAt.IsZero() {
			t.Fatalf("kept: %+v %v", h, err)
		}

		turn, _, err := s.ClaimTurn(ctx, "c")
		if err != nil || turn == nil {
			t.Fatal(turn, err)
		}
		pc := &chat.PromptContext{Group: "chat", Window: 8000, Reserve: 1000, Tokens: 6500, Shown: 1,
			Summary: true, SummaryThrough: ids[1], SummaryCovered: 2, SummaryTokens: 3}
		turn.Context = pc
		if err := s.RecordRun(ctx, chat.Run{RunID: "r1", ChatKey: "c", TurnID: turn.ID, Iteration: 1, StopType: "NORMAL", Context: pc}); err != nil {
			t.Fatal(err)
		}
		turn.Status = chat.TurnDone
		if err := s.FinishTurn(ctx, turn); err != nil {
			t.Fatal(err)
		}
		if r, err := s.Run(ctx, "r1"); err != nil || r.Context == nil || *r.Context != *pc {
			t.Errorf("the run's context: %+v %v", r.Context, err)
		}
		if ts, err := s.Turns(ctx, "c"); err != nil || len(ts) != 1 || ts[0].Context == nil || *ts[0].Context != *pc {
			t.Errorf("the turn's context: %+v %v", ts, err)
		}

		if _, err := s.Reset(ctx, "c"); err != nil {
			t.Fatal(err)
		}
		if h, err := s.HistorySummaryOf(ctx, "c"); err != nil || h != nil {
			t.Errorf("a reset kept the summary: %+v %v", h, err)
		}
		// A summary finished after the reset is not kept: what it covers is gone.
		if ok, err := s.SaveHistorySummary(ctx, chat.HistorySummary{ChatKey: "c", ThroughID: ids[2], Covered: 3, Text: "late"}); err != nil || ok {
			t.Errorf("a summary of deleted messages was kept: %v %v", ok, err)
		}
	})
}
