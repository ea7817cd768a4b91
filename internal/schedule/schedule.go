// Package schedule keeps plugins' timers in the database: one-shot ones
// (a due time) and recurring ones (a 5-field cron expression in an IANA
// time zone). Timers outlive restarts, and every nekro process sharing
// the database may fire them: Claim takes a due timer with one
// conditional statement (DELETE of a one-shot, UPDATE of a recurring
// timer's due time to its next occurrence), so exactly one process fires
// each occurrence. A timer belongs to one plugin and one chat: each call
// names both, so a chat can neither see nor change another's timers.
package schedule

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/nekro-go/nekro/internal/db"
)

const component = "timers"

// One migration list serves both databases: the SQL is the same.
var migrations = []db.Migration{
	{Version: 1, Name: "create timers", SQL: `CREATE TABLE timers (
	plugin_key TEXT   NOT NULL,
	chat_key   TEXT   NOT NULL,
	id         TEXT   NOT NULL,
	due_ms     BIGINT NOT NULL,
	cron       TEXT   NOT NULL,
	tz         TEXT   NOT NULL,
	payload    TEXT   NOT NULL,
	created_ms BIGINT NOT NULL,
	PRIMARY KEY (plugin_key, chat_key, id)
)`},
	{Version: 2, Name: "index timers by due time", SQL: `CREATE INDEX timers_due ON timers (due_ms)`},
	// A chat's budget of turns its timers wake: one row per slot, each
	// holding the time it was last used (see TakeTurn).
	{Version: 3, Name: "create timer turn slots", SQL: `CREATE TABLE timer_turns (
	chat_key TEXT    NOT NULL,
	slot     INTEGER NOT NULL,
	used_ms  BIGINT  NOT NULL,
	PRIMARY KEY (chat_key, slot)
)`},
}

// MaxPerChat bounds the timers one plugin keeps for one chat.
const MaxPerChat = 100

// MaxPayload bounds a timer's payload, in bytes.
const MaxPayload = 16 << 10

// Timer is one timer.
type Timer struct {
	Plugin, Chat, ID string
	// Due is the next time it fires.
	Due time.Time
	// Cron, when set, makes it recurring: a 5-field expression (minute
	// hour day-of-month month day-of-week) read in the time zone TZ.
	Cron, TZ string
	// Payload is the plugin's own: what the timer is for.
	Payload string
	Created time.Time
}

// Fired is a timer Claim took: its occurrence is the claimer's to fire.
type Fired struct {
	Timer
	// Late is how long after its due time it was claimed.
	Late time.Duration
}

// Store reads and writes the timers.
type Store struct {
	db    *sql.DB
	close func() error
}

// Open migrates the table on h.
func Open(ctx context.Context, h db.Handle) (*Store, error) {
	w, closeFn, err := db.Writer(ctx, h, component, migrations)
	if err != nil {
		return nil, fmt.Errorf("timers: %w", err)
	}
	return &Store{db: w, close: closeFn}, nil
}

// Close releases the store's own handle; the database stays open.
func (s *Store) Close() error { return s.close() }

var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// Next returns the first occurrence of the 5-field cron expression spec,
// read in the IANA time zone tz ("" is UTC), strictly after after.
func Next(spec, tz string, after time.Time) (time.Time, error) {
	if strings.Contains(spec, "=") || strings.HasPrefix(strings.TrimSpace(spec), "@") {
		return time.Time{}, fmt.Errorf("cron expression %q: want 5 fields (minute hour day month weekday), no descriptors or TZ=", spec)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || strings.EqualFold(tz, "local") {
		return time.Time{}, fmt.Errorf("time zone %q: want an IANA name such as Asia/Shanghai or UTC", tz)
	}
	sched, err := parser.Parse(spec)
	if err != nil {
		return time.Time{}, fmt.Errorf("cron expression %q: %w", spec, err)
	}
	sched.(*cron.SpecSchedule).Location = loc
	next := sched.Next(after)
	if next.IsZero() {
		return time.Time{}, fmt.Errorf("cron expression %q never fires", spec)
	}
	return next, nil
}

// NewID returns a random 128-bit id in hex.
func NewID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Set adds t, or replaces the timer of t's plugin and chat with t's ID,
// and returns its ID (a new random one when t.ID is empty). A recurring
// timer with no Due gets its next occurrence after now; a one-shot one
// needs a Due.
func (s *Store) Set(ctx context.Context, t Timer) (string, error) {
	if t.Plugin == "" || t.Chat == "" {
		return "", errors.New("timer: plugin and chat are required")
	}
	if len(t.Payload) > MaxPayload || len(t.ID) > 200 {
		return "", fmt.Errorf("timer: payload over %d bytes or id over 200", MaxPayload)
	}
	now := time.Now()
	if t.Cron != "" {
		next, err := Next(t.Cron, t.TZ, now)
		if err != nil {
			return "", err
		}
		if t.Due.IsZero() {
			t.Due = next
		}
	} else {
		t.TZ = ""
	}
	if t.Due.IsZero() {
		return "", errors.New("timer: a one-shot timer needs a due time")
	}
	if t.ID == "" {
		t.ID = NewID()
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM timers WHERE plugin_key = $1 AND chat_key = $2 AND id <> $3`,
		t.Plugin, t.Chat, t.ID).Scan(&n); err != nil {
		return "", fmt.Errorf("timers: %w", err)
	}
	if n >= MaxPerChat {
		return "", fmt.Errorf("timer: this chat already has %d timers; clear some first", n)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO timers (plugin_key, chat_key, id, due_ms, cron, tz, payload, created_ms)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (plugin_key, chat_key, id) DO UPDATE SET due_ms = excluded.due_ms, cron = excluded.cron,
			tz = excluded.tz, payload = excluded.payload`,
		t.Plugin, t.Chat, t.ID, t.Due.UnixMilli(), t.Cron, t.TZ, t.Payload, now.UnixMilli())
	if err != nil {
		return "", fmt.Errorf("timers: %w", err)
	}
	return t.ID, nil
}

// Clear removes the timer id of plugin and chat, and says whether there
// was one.
func (s *Store) Clear(ctx context.Context, plugin, chat, id string) (bool, error) {
	r, err := s.db.ExecContext(ctx, `DELETE FROM timers WHERE plugin_key = $1 AND chat_key = $2 AND id = $3`, plugin, chat, id)
	if err != nil {
		return false, fmt.Errorf("timers: %w", err)
	}
	n, _ := r.RowsAffected()
	return n > 0, nil
}

// List returns plugin's timers of chat, soonest first.
func (s *Store) List(ctx context.Context, plugin, chat string) ([]Timer, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, due_ms, cron, tz, payload, created_ms FROM timers
		WHERE plugin_key = $1 AND chat_key = $2 ORDER BY due_ms, id`, plugin, chat)
	if err != nil {
		return nil, fmt.Errorf("timers: %w", err)
	}
	defer rows.Close()
	var out []Timer
	for rows.Next() {
		t := Timer{Plugin: plugin, Chat: chat}
		var due, created int64
		if err := rows.Scan(&t.ID, &due, &t.Cron, &t.TZ, &t.Payload, &created); err != nil {
			return nil, fmt.Errorf("timers: %w", err)
		}
		t.Due, t.Created = time.UnixMilli(due), time.UnixMilli(created)
		out = append(out, t)
	}
	return out, rows.Err()
}

// Claim takes up to limit timers of the given plugins due at now: a
// one-shot timer is removed, a recurring one moves to its first
// occurrence after now (occurrences missed while no process ran collapse
// into this one). Each statement is conditional on the due time read, so
// of several processes claiming at once exactly one gets each occurrence.
// A recurring timer whose expression no longer parses is removed.
func (s *Store) Claim(ctx context.Context, now time.Time, plugins []string, limit int) ([]Fired, error) {
	if len(plugins) == 0 {
		return nil, nil
	}
	args := []any{now.UnixMilli(), limit}
	marks := make([]string, len(plugins))
	for i, p := range plugins {
		args = append(args, p)
		marks[i] = fmt.Sprintf("$%d", i+3)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT plugin_key, chat_key, id, due_ms, cron, tz FROM timers
		WHERE due_ms <= $1 AND plugin_key IN (`+strings.Join(marks, ", ")+`) ORDER BY due_ms LIMIT $2`, args...)
	if err != nil {
		return nil, fmt.Errorf("timers: %w", err)
	}
	var due []Fired
	for rows.Next() {
		var f Fired
		var ms int64
		if err := rows.Scan(&f.Plugin, &f.Chat, &f.ID, &ms, &f.Cron, &f.TZ); err != nil {
			rows.Close()
			return nil, fmt.Errorf("timers: %w", err)
		}
		f.Due = time.UnixMilli(ms)
		due = append(due, f)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("timers: %w", err)
	}
	var out []Fired
	for _, f := range due {
		var row *sql.Row
		key := []any{f.Plugin, f.Chat, f.ID, f.Due.UnixMilli(), f.Cron}
		if f.Cron == "" {
			row = s.db.QueryRowContext(ctx, `DELETE FROM timers
				WHERE plugin_key = $1 AND chat_key = $2 AND id = $3 AND due_ms = $4 AND cron = $5
				RETURNING payload, created_ms`, key...)
		} else {
			next, err := Next(f.Cron, f.TZ, later(now, f.Due))
			if err != nil {
				s.db.ExecContext(ctx, `DELETE FROM timers
					WHERE plugin_key = $1 AND chat_key = $2 AND id = $3 AND due_ms = $4 AND cron = $5`, key...)
				continue
			}
			row = s.db.QueryRowContext(ctx, `UPDATE timers SET due_ms = $6
				WHERE plugin_key = $1 AND chat_key = $2 AND id = $3 AND due_ms = $4 AND cron = $5
				RETURNING payload, created_ms`, append(key, next.UnixMilli())...)
		}
		var created int64
		switch err := row.Scan(&f.Payload, &created); {
		case errors.Is(err, sql.ErrNoRows):
			continue // another process took it, or it changed
		case err != nil:
			return out, fmt.Errorf("timers: %w", err)
		}
		f.Created = time.UnixMilli(created)
		f.Late = max(now.Sub(f.Due), 0)
		out = append(out, f)
	}
	return out, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// TakeTurn takes one of chat's perHour turns a timer may wake in any
// hour, and reports whether there was one left. The chat has perHour
// slots, each holding when it was last taken; a slot is free an hour
// after that. Taking one is a single conditional UPDATE, so processes
// sharing the database (and restarts) count together, and two never take
// the same slot. perHour <= 0 is no budget: always true.
func (s *Store) TakeTurn(ctx context.Context, chat string, now time.Time, perHour int) (bool, error) {
	if perHour <= 0 {
		return true, nil
	}
	free := now.Add(-time.Hour).UnixMilli()
	for range 8 {
		r, err := s.db.ExecContext(ctx, `UPDATE timer_turns SET used_ms = $1
			WHERE chat_key = $2 AND used_ms <= $3 AND slot = (SELECT slot FROM timer_turns
				WHERE chat_key = $2 AND slot < $4 AND used_ms <= $3 ORDER BY used_ms, slot LIMIT 1)`,
			now.UnixMilli(), chat, free, perHour)
		if err != nil {
			return false, fmt.Errorf("timer turns: %w", err)
		}
		if n, _ := r.RowsAffected(); n == 1 {
			return true, nil
		}
		var slots, open int
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(CASE WHEN used_ms <= $3 THEN 1 ELSE 0 END), 0)
			FROM timer_turns WHERE chat_key = $1 AND slot < $2`, chat, perHour, free).Scan(&slots, &open); err != nil {
			return false, fmt.Errorf("timer turns: %w", err)
		}
		if slots >= perHour && open == 0 {
			return false, nil
		}
		if slots < perHour {
			// The chat's first timer turn, or a larger budget: add the
			// missing slots, free.
			for i := range perHour {
				if _, err := s.db.ExecContext(ctx, `INSERT INTO timer_turns (chat_key, slot, used_ms) VALUES ($1, $2, 0)
					ON CONFLICT (chat_key, slot) DO NOTHING`, chat, i); err != nil {
					return false, fmt.Errorf("timer turns: %w", err)
				}
			}
		}
		// Another process took the free slot meanwhile: look again.
	}
	return false, nil
}
