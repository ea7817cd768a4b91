package server

// The run log and the dashboard's numbers:
//
//	GET /api/runs?q=&chat=&stop_type=&method=&since=&until=&limit=&before=
//	GET /api/runs/{run}
//	GET /api/stats?since=&bucket=hour|day
//
// The run log searches every chat's runs for the operator, a user's own
// chats' for a user token. The stats are the operator's.

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/pluginhost"
)

// visibleChats is the chats the request may read runs of: nil (every
// chat) for the operator, the user's own for a user token. On failure it
// has written the answer.
func (s *Server) visibleChats(w http.ResponseWriter, r *http.Request) ([]string, bool) {
	id := identity(r)
	if id.Admin {
		return nil, true
	}
	if id.UserID == "" || s.users == nil {
		writeError(w, http.StatusForbidden, "not signed in")
		return nil, false
	}
	mine, err := s.users.Chats(r.Context(), id.UserID)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "%v", err)
		return nil, false
	}
	return mine, true
}

// timeParam reads a time parameter: an RFC 3339 time, or a duration
// before now ("24h", "90m"). Absent is the zero time.
func timeParam(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2006-01-02T15:04:05Z) nor a duration before now (24h)", v)
	}
	return t, nil
}

// searchRuns answers GET /api/runs: a page of runs across chats, newest
// first, as {"runs": [...], "next_before": RUN_ID or null}.
func (s *Server) searchRuns(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query()
	now := time.Now()
	q := chat.RunQuery{Text: p.Get("q"), ChatKey: p.Get("chat"), StopType: strings.ToUpper(p.Get("stop_type")),
		Method: p.Get("method"), Before: p.Get("before")}
	var err error
	if q.Since, err = timeParam(p.Get("since"), now); err != nil {
		writeError(w, http.StatusBadRequest, "since: %v", err)
		return
	}
	if q.Until, err = timeParam(p.Get("until"), now); err != nil {
		writeError(w, http.StatusBadRequest, "until: %v", err)
		return
	}
	if v := p.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > chat.MaxPageLimit {
			writeError(w, http.StatusBadRequest, "limit must be a number from 1 to %d (default %d)", chat.MaxPageLimit, chat.DefaultPageLimit)
			return
		}
		q.Limit = n
	}
	var ok bool
	if q.Chats, ok = s.visibleChats(w, r); !ok {
		return
	}
	runs, next, err := s.chats.SearchRuns(r.Context(), q)
	switch {
	case errors.Is(err, chat.ErrNoSuchRun):
		writeError(w, http.StatusBadRequest, "before=%q: %v", q.Before, err)
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	var nextBefore any
	if next != "" {
		nextBefore = next
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": runs, "next_before": nextBefore})
}

// oneRun answers GET /api/runs/{run}; a run of a chat the user token does
// not belong to is 404, as one that does not exist.
func (s *Server) oneRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("run")
	chats, ok := s.visibleChats(w, r)
	if !ok {
		return
	}
	run, err := s.chats.Run(r.Context(), id)
	if err == nil && chats != nil && !slices.Contains(chats, run.ChatKey) {
		err = chat.ErrNoSuchRun
	}
	switch {
	case errors.Is(err, chat.ErrNoSuchRun):
		writeError(w, http.StatusNotFound, "no such run: %s", id)
	case err != nil:
		writeError(w, http.StatusInternalServerError, "%v", err)
	default:
		writeJSON(w, http.StatusOK, run)
	}
}

// pluginCounts are one plugin's method calls in the stats' window.
type pluginCounts struct {
	Plugin string `json:"plugin"` // its key; "" for methods no plugin has now
	Calls  int    `json:"calls"`
	Errors int    `json:"errors"`
	MS     int64  `json:"ms"`
}

// statsAnswer is GET /api/stats: chat.Stats and the methods' calls
// summed by plugin.
type statsAnswer struct {
	*chat.Stats
	Plugins []pluginCounts `json:"plugins"`
}

// stats answers GET /api/stats?since=&bucket=hour|day: what happened
// since (default: 24 hours by hour, 30 days by day) in buckets.
func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query()
	size, window := chat.Hour, 24*time.Hour
	switch p.Get("bucket") {
	case "", "hour":
	case "day":
		size, window = chat.Day, 30*24*time.Hour
	default:
		writeError(w, http.StatusBadRequest, "bucket must be hour or day")
		return
	}
	now := time.Now()
	since, err := timeParam(p.Get("since"), now)
	if err != nil {
		writeError(w, http.StatusBadRequest, "since: %v", err)
		return
	}
	if since.IsZero() {
		since = now.Add(-window)
	}
	st, err := s.chats.Stats(r.Context(), since, size, nil)
	switch {
	case errors.Is(err, chat.ErrTooManyBuckets):
		writeError(w, http.StatusBadRequest, "since=%s: %v", p.Get("since"), err)
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, statsAnswer{Stats: st, Plugins: s.byPlugin(st.Methods)})
}

// byPlugin sums methods' calls by the plugin that has the method now,
// the busiest first.
func (s *Server) byPlugin(methods []chat.MethodCounts) []pluginCounts {
	owner := map[string]string{}
	for _, p := range s.host.Registry().All() {
		for _, m := range pluginhost.Methods(p) {
			owner[m.Name] = p.Key()
		}
	}
	sums := map[string]*pluginCounts{}
	for _, m := range methods {
		key := owner[m.Method]
		c := sums[key]
		if c == nil {
			c = &pluginCounts{Plugin: key}
			sums[key] = c
		}
		c.Calls += m.Calls
		c.Errors += m.Errors
		c.MS += m.MS
	}
	out := []pluginCounts{}
	for _, c := range sums {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b pluginCounts) int {
		if d := b.Calls - a.Calls; d != 0 {
			return d
		}
		return strings.Compare(a.Plugin, b.Plugin)
	})
	return out
}
