package chat

// The run log: every chat's execution records searched together, and the
// numbers the dashboard draws, computed from the same tables.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// RunQuery selects runs across chats for SearchRuns. Zero fields select
// everything.
type RunQuery struct {
	// Text is words each of which a run's code, output, note or calls
	// (their errors) contains, case-insensitively (ASCII).
	Text string
	// Chats, when not nil, are the only chats searched (a user's own); an
	// empty non-nil list finds nothing.
	Chats []string
	// ChatKey is one chat.
	ChatKey string
	// StopType is the runs' stop type, as recorded ("ERROR", "AGENT"...).
	StopType string
	// Method is a plugin method the run called, or ended with.
	Method string
	// Since and Until bound the runs' times: Since <= time < Until.
	Since, Until time.Time
	// Limit is the page's size: 1 to MaxPageLimit, DefaultPageLimit when 0.
	Limit int
	// Before is the run id the page ends before ("" for the newest), the
	// next value SearchRuns returned.
	Before string
}

// likePattern is a LIKE pattern matching s anywhere, its own % _ and \
// escaped (with ESCAPE '\'); lowercased, compared with LOWER(column).
func likePattern(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(strings.ToLower(s)) + "%"
}

// where builds the WHERE clause of q, with its arguments numbered from 1.
func (q RunQuery) where() (string, []any, error) {
	var conds []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if q.Chats != nil {
		if len(q.Chats) == 0 {
			return "", nil, errNone
		}
		ph := make([]string, len(q.Chats))
		for i, k := range q.Chats {
			ph[i] = arg(k)
		}
		conds = append(conds, "chat_key IN ("+strings.Join(ph, ", ")+")")
	}
	if q.ChatKey != "" {
		conds = append(conds, "chat_key = "+arg(q.ChatKey))
	}
	if q.StopType != "" {
		conds = append(conds, "stop_type = "+arg(q.StopType))
	}
	if q.Method != "" {
		conds = append(conds, "(agent_method = "+arg(q.Method)+
			` OR LOWER(calls) LIKE `+arg(likePattern(`"method":"`+q.Method+`"`))+` ESCAPE '\')`)
	}
	if !q.Since.IsZero() {
		conds = append(conds, "created_at >= "+arg(micros(q.Since)))
	}
	if !q.Until.IsZero() {
		conds = append(conds, "created_at < "+arg(micros(q.Until)))
	}
	for _, word := range strings.Fields(q.Text) {
		p := arg(likePattern(word))
		var ors []string
		for _, col := range []string{"code", "output", "note", "calls"} {
			ors = append(ors, "LOWER("+col+") LIKE "+p+` ESCAPE '\'`)
		}
		conds = append(conds, "("+strings.Join(ors, " OR ")+")")
	}
	if len(conds) == 0 {
		return "", nil, nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args, nil
}

// errNone is where's answer to a query that can find nothing.
var errNone = errors.New("nothing to find")

// SearchRuns returns a page of the runs q selects across chats, newest
// first, and the run id to pass as Before for the next (older) page, ""
// when none is left. A Before naming no run fails with ErrNoSuchRun.
func (s *Service) SearchRuns(ctx context.Context, q RunQuery) (rs []Run, next string, err error) {
	limit := pageLimit(q.Limit)
	where, args, err := q.where()
	if errors.Is(err, errNone) {
		return []Run{}, "", nil
	}
	if q.Before != "" {
		var at int64
		err := s.r.QueryRowContext(ctx, `SELECT created_at FROM chat_runs WHERE run_id = $1`, q.Before).Scan(&at)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, "", fmt.Errorf("%w %q: pass a run_id from the run log (or next_before)", ErrNoSuchRun, q.Before)
		}
		if err != nil {
			return nil, "", fmt.Errorf("run log: %w", err)
		}
		if where == "" {
			where = " WHERE "
		} else {
			where += " AND "
		}
		args = append(args, at, q.Before)
		n := len(args)
		where += fmt.Sprintf("(created_at < $%d OR (created_at = $%d AND run_id < $%d))", n-1, n-1, n)
	}
	args = append(args, limit+1)
	rows, err := s.r.QueryContext(ctx, `SELECT `+runColumns+` FROM chat_runs`+where+
		fmt.Sprintf(" ORDER BY created_at DESC, run_id DESC LIMIT $%d", len(args)), args...)
	if err != nil {
		return nil, "", fmt.Errorf("run log: %w", err)
	}
	rs, err = scanRuns(rows, "the run log")
	if err != nil {
		return nil, "", err
	}
	if len(rs) > limit {
		rs = rs[:limit]
		next = rs[limit-1].RunID
	}
	return rs, next, nil
}

// Run returns one run by its id (ErrNoSuchRun when there is none).
func (s *Service) Run(ctx context.Context, runID string) (Run, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+runColumns+` FROM chat_runs WHERE run_id = $1`, runID)
	if err != nil {
		return Run{}, fmt.Errorf("run %s: %w", runID, err)
	}
	rs, err := scanRuns(rows, "run "+runID)
	if err != nil {
		return Run{}, err
	}
	if len(rs) == 0 {
		return Run{}, fmt.Errorf("%w %q", ErrNoSuchRun, runID)
	}
	return rs[0], nil
}

// Bucket sizes of Stats.
const (
	Hour = time.Hour
	Day  = 24 * time.Hour
)

// Counts are what happened in a span of time: turns and how they ended,
// the model's requests, runs and the plugin calls they made.
type Counts struct {
	Turns         int   `json:"turns"`
	FailedTurns   int   `json:"failed_turns"`
	TurnMS        int64 `json:"turn_ms"` // finished turns' time, summed
	FinishedTurns int   `json:"finished_turns"`
	ModelRequests int   `json:"model_requests"`
	ModelMS       int64 `json:"model_ms"` // time waiting for the model, summed
	Runs          int   `json:"runs"`
	RunErrors     int   `json:"run_errors"` // runs stopped by ERROR or TIMEOUT
	RunMS         int64 `json:"run_ms"`     // runs' durations, summed
	Calls         int   `json:"calls"`
	CallErrors    int   `json:"call_errors"`
}

// Bucket is one span of a Stats series, from Start for the bucket size.
type Bucket struct {
	Start time.Time `json:"start"`
	Counts
}

// ChatCounts are one chat's counts in a Stats window.
type ChatCounts struct {
	ChatKey string `json:"chat_key"`
	Counts
}

// MethodCounts are one plugin method's calls in a Stats window.
type MethodCounts struct {
	Method string `json:"method"`
	Calls  int    `json:"calls"`
	Errors int    `json:"errors"`
	MS     int64  `json:"ms"` // the calls' time, summed
}

// Stats are the dashboard's numbers since a time: a series of buckets
// (every bucket from the first to the last, empty ones included), the
// totals, and the chats and methods ranked by how busy they were.
type Stats struct {
	Since   time.Time      `json:"since"`
	Bucket  string         `json:"bucket"` // "hour" or "day"
	Series  []Bucket       `json:"series"`
	Totals  Counts         `json:"totals"`
	Chats   []ChatCounts   `json:"chats"`   // the busiest first, at most RankLimit
	Methods []MethodCounts `json:"methods"` // the most called first, every one
}

// RankLimit is how many chats Stats ranks.
const RankLimit = 20

// maxStatsBuckets bounds a series: a year of days, or a month of hours.
const maxStatsBuckets = 24 * 31

// ErrTooManyBuckets is Stats's answer to a window too long for its
// bucket size.
var ErrTooManyBuckets = fmt.Errorf("over %d buckets: ask for a later since or bucket=day", maxStatsBuckets)

// Stats counts what happened since since (until now), by buckets of size
// (Hour or Day, aligned on UTC), over the chats given (nil: all).
func (s *Service) Stats(ctx context.Context, since time.Time, size time.Duration, chats []string) (*Stats, error) {
	name := "hour"
	if size == Day {
		name = "day"
	} else if size != Hour {
		return nil, fmt.Errorf("bucket size %s: hour or day", size)
	}
	step := size.Microseconds()
	first := micros(since) / step * step
	now := micros(time.Now())
	if (now-first)/step >= maxStatsBuckets {
		return nil, ErrTooManyBuckets
	}
	st := &Stats{Since: fromMicros(micros(since)), Bucket: name, Chats: []ChatCounts{}, Methods: []MethodCounts{}}
	for b := first; b <= now; b += step {
		st.Series = append(st.Series, Bucket{Start: fromMicros(b)})
	}
	if st.Series == nil {
		st.Series = []Bucket{}
	}
	bucket := func(at int64) *Counts {
		i := (at - first) / step
		if at < first || int(i) >= len(st.Series) {
			return nil
		}
		return &st.Series[i].Counts
	}
	perChat := map[string]*ChatCounts{}
	ofChat := func(key string) *Counts {
		c := perChat[key]
		if c == nil {
			c = &ChatCounts{ChatKey: key}
			perChat[key] = c
		}
		return &c.Counts
	}
	scope, args := "", []any{micros(since)}
	if chats != nil {
		if len(chats) == 0 {
			return st, nil
		}
		ph := make([]string, len(chats))
		for i, k := range chats {
			args = append(args, k)
			ph[i] = fmt.Sprintf("$%d", len(args))
		}
		scope = " AND chat_key IN (" + strings.Join(ph, ", ") + ")"
	}

	// Turns, one row each: a window holds thousands, not millions.
	rows, err := s.r.QueryContext(ctx, `SELECT chat_key, status, requests, model_us, started_at, finished_at
		FROM chat_turns WHERE started_at >= $1`+scope, args...)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	for rows.Next() {
		var (
			key, status        string
			requests           int
			modelUS, from, end int64
		)
		if err := rows.Scan(&key, &status, &requests, &modelUS, &from, &end); err != nil {
			rows.Close()
			return nil, fmt.Errorf("stats: %w", err)
		}
		for _, c := range []*Counts{bucket(from), &st.Totals, ofChat(key)} {
			if c == nil {
				continue
			}
			c.Turns++
			if status == TurnFailed {
				c.FailedTurns++
			}
			if end > 0 && status != TurnRunning {
				c.FinishedTurns++
				c.TurnMS += (end - from) / 1000
			}
			c.ModelRequests += requests
			c.ModelMS += modelUS / 1000
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}

	// Runs and their calls.
	methods := map[string]*MethodCounts{}
	rows, err = s.r.QueryContext(ctx, `SELECT chat_key, stop_type, duration_ms, calls, created_at
		FROM chat_runs WHERE created_at >= $1`+scope, args...)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			key, stop, calls string
			ms, at           int64
		)
		if err := rows.Scan(&key, &stop, &ms, &calls, &at); err != nil {
			return nil, fmt.Errorf("stats: %w", err)
		}
		var list []struct {
			Method string `json:"method"`
			Micros int64  `json:"duration_us"`
			Error  string `json:"error"`
		}
		json.Unmarshal([]byte(calls), &list) // a record that does not read counts no calls
		callErrors := 0
		for _, c := range list {
			m := methods[c.Method]
			if m == nil {
				m = &MethodCounts{Method: c.Method}
				methods[c.Method] = m
			}
			m.Calls++
			m.MS += c.Micros / 1000
			if c.Error != "" {
				m.Errors++
				callErrors++
			}
		}
		for _, c := range []*Counts{bucket(at), &st.Totals, ofChat(key)} {
			if c == nil {
				continue
			}
			c.Runs++
			if stop == "ERROR" || stop == "TIMEOUT" {
				c.RunErrors++
			}
			c.RunMS += ms
			c.Calls += len(list)
			c.CallErrors += callErrors
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	for _, c := range perChat {
		st.Chats = append(st.Chats, *c)
	}
	slices.SortFunc(st.Chats, func(a, b ChatCounts) int {
		if d := (b.Turns + b.Runs) - (a.Turns + a.Runs); d != 0 {
			return d
		}
		return strings.Compare(a.ChatKey, b.ChatKey)
	})
	if len(st.Chats) > RankLimit {
		st.Chats = st.Chats[:RankLimit]
	}
	for _, m := range methods {
		st.Methods = append(st.Methods, *m)
	}
	slices.SortFunc(st.Methods, func(a, b MethodCounts) int {
		if d := b.Calls - a.Calls; d != 0 {
			return d
		}
		return strings.Compare(a.Method, b.Method)
	})
	return st, nil
}
