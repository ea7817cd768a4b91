package chat_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/chat"
)

// The run log finds runs across chats by words of their code, output or
// errors (LIKE's own characters taken literally), by chat, stop type,
// method and time, pages them newest first, and the dashboard's numbers
// count what the tables hold.
func TestRunLogAndStats(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			s, _ := open(t, kind)
			ctx := context.Background()
			now := time.Now().UTC().Truncate(time.Microsecond)
			old := now.Add(-50 * time.Hour)
			runs := []chat.Run{
				{RunID: "r1", ChatKey: "alpha", Code: "print('x')", Output: "the Pelican flew", StopType: "NORMAL", DurationMS: 30,
					Calls: []byte(`[{"method":"send_msg_text","duration_us":2000}]`), Time: now.Add(-3 * time.Minute)},
				{RunID: "r2", ChatKey: "beta", Code: "boom()", Output: "Traceback", StopType: "ERROR", DurationMS: 10,
					Calls: []byte(`[{"method":"roll_dice","duration_us":1000,"error":"dice fell off the table"}]`), Time: now.Add(-2 * time.Minute)},
				{RunID: "r3", ChatKey: "alpha", Code: "ask()", Output: "100% sure_thing", StopType: "AGENT", AgentMethod: "ask_agent",
					DurationMS: 20, Time: now.Add(-time.Minute)},
				{RunID: "r0", ChatKey: "alpha", Code: "pass", Output: "pelican of old", StopType: "NORMAL", Time: old},
			}
			for _, r := range runs {
				if err := s.RecordRun(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			find := func(q chat.RunQuery) []string {
				t.Helper()
				rs, _, err := s.SearchRuns(ctx, q)
				if err != nil {
					t.Fatalf("%+v: %v", q, err)
				}
				var ids []string
				for _, r := range rs {
					ids = append(ids, r.RunID)
				}
				return ids
			}
			for _, c := range []struct {
				q    chat.RunQuery
				want []string
			}{
				{chat.RunQuery{}, []string{"r3", "r2", "r1", "r0"}},
				{chat.RunQuery{Text: "pelican"}, []string{"r1", "r0"}},
				{chat.RunQuery{Text: "pelican flew"}, []string{"r1"}},
				{chat.RunQuery{Text: "fell off"}, []string{"r2"}}, // a call's error
				{chat.RunQuery{Text: "boom("}, []string{"r2"}},    // code
				{chat.RunQuery{Text: "100%"}, []string{"r3"}},
				{chat.RunQuery{Text: "%"}, []string{"r3"}},
				{chat.RunQuery{Text: "_"}, []string{"r3", "r2", "r1"}}, // "_" literally: sure_thing, calls' duration_us
				{chat.RunQuery{ChatKey: "alpha"}, []string{"r3", "r1", "r0"}},
				{chat.RunQuery{StopType: "ERROR"}, []string{"r2"}},
				{chat.RunQuery{Method: "roll_dice"}, []string{"r2"}},
				{chat.RunQuery{Method: "ask_agent"}, []string{"r3"}},
				{chat.RunQuery{Method: "roll"}, nil},
				{chat.RunQuery{Since: now.Add(-150 * time.Second)}, []string{"r3", "r2"}},
				{chat.RunQuery{Until: now.Add(-150 * time.Second)}, []string{"r1", "r0"}},
				{chat.RunQuery{Chats: []string{"beta"}}, []string{"r2"}},
				{chat.RunQuery{Chats: []string{"beta"}, Text: "pelican"}, nil},
				{chat.RunQuery{Chats: []string{}}, nil},
			} {
				if got := find(c.q); !slices.Equal(got, c.want) {
					t.Errorf("%+v: %v, want %v", c.q, got, c.want)
				}
			}
			// Pages, newest first.
			page, next, err := s.SearchRuns(ctx, chat.RunQuery{Limit: 2})
			if err != nil || len(page) != 2 || next != "r2" {
				t.Fatalf("first page: %d runs, next %q, %v", len(page), next, err)
			}
			if got := find(chat.RunQuery{Limit: 2, Before: next}); !slices.Equal(got, []string{"r1", "r0"}) {
				t.Errorf("second page: %v", got)
			}
			if _, _, err := s.SearchRuns(ctx, chat.RunQuery{Before: "nope"}); !errors.Is(err, chat.ErrNoSuchRun) {
				t.Errorf("before a run that does not exist: %v", err)
			}
			if r, err := s.Run(ctx, "r2"); err != nil || r.ChatKey != "beta" {
				t.Errorf("Run: %+v %v", r, err)
			}

			// A failed turn with two model requests in beta.
			if _, err := s.AddMessage(ctx, chat.Message{ChatKey: "beta", Role: chat.User, SenderID: "u", SenderName: "U", Text: "hi"}); err != nil {
				t.Fatal(err)
			}
			turn, _, err := s.ClaimTurn(ctx, "beta")
			if err != nil || turn == nil {
				t.Fatalf("claim: %v %v", turn, err)
			}
			turn.Status, turn.Error, turn.Requests, turn.ModelUS = chat.TurnFailed, "model down", 2, 3000
			if err := s.FinishTurn(ctx, turn); err != nil {
				t.Fatal(err)
			}

			st, err := s.Stats(ctx, now.Add(-5*time.Hour), chat.Hour, nil)
			if err != nil {
				t.Fatal(err)
			}
			tot := st.Totals
			if tot.Runs != 3 || tot.RunErrors != 1 || tot.Turns != 1 || tot.FailedTurns != 1 || tot.ModelRequests != 2 ||
				tot.ModelMS != 3 || tot.Calls != 2 || tot.CallErrors != 1 || tot.RunMS != 60 {
				t.Errorf("totals %+v", tot)
			}
			if n := len(st.Series); n < 6 || n > 7 {
				t.Errorf("%d hourly buckets over 5 hours", n)
			}
			var inSeries int
			for _, b := range st.Series {
				inSeries += b.Runs
			}
			if inSeries != 3 {
				t.Errorf("the series holds %d runs", inSeries)
			}
			if len(st.Chats) != 2 || st.Chats[0].ChatKey != "alpha" || st.Chats[0].Runs != 2 || st.Chats[1].Turns != 1 {
				t.Errorf("chats ranked %+v", st.Chats)
			}
			if len(st.Methods) != 2 || st.Methods[0].Method != "roll_dice" || st.Methods[0].Errors != 1 {
				t.Errorf("methods ranked %+v", st.Methods)
			}
			// A user's view counts their chats only; days reach further back.
			st, err = s.Stats(ctx, now.Add(-72*time.Hour), chat.Day, []string{"alpha"})
			if err != nil || st.Totals.Runs != 3 || st.Totals.Turns != 0 || len(st.Series) < 3 || len(st.Series) > 5 {
				t.Errorf("alpha by day: %+v %v", st, err)
			}
			if _, err := s.Stats(ctx, now.Add(-60*24*time.Hour), chat.Hour, nil); !errors.Is(err, chat.ErrTooManyBuckets) {
				t.Errorf("60 days of hours: %v", err)
			}
		})
	}
}
