// Package uids gives each chat its own host uid for its sandboxes, from a
// range the operator sets, and remembers it in the database: a chat keeps
// its uid across restarts, and hosts sharing one PostgreSQL database agree
// on it. With one uid per chat, a chat's sandbox can read and write only
// its own directories, and a process of one chat cannot connect to, signal
// or trace another chat's.
package uids

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nekro-go/nekro/internal/db"
)

// DefaultRange is where chat uids come from unless the operator says
// otherwise: far above system uids (< 1000), login users (< 60000),
// nobody (65534) and the subordinate ranges useradd hands out for
// user namespaces (from 100000 up, 65536 per user).
var DefaultRange = Range{First: 1_000_000_000, Last: 1_000_999_999}

// Range is an inclusive range of host uids; each chat's gid equals its uid.
type Range struct{ First, Last int }

// ParseRange reads "FIRST-LAST", e.g. "1000000000-1000999999".
func ParseRange(s string) (Range, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "-")
	first, err1 := strconv.Atoi(strings.TrimSpace(a))
	last, err2 := strconv.Atoi(strings.TrimSpace(b))
	r := Range{first, last}
	if !ok || err1 != nil || err2 != nil {
		return Range{}, fmt.Errorf("uid range %q is not FIRST-LAST, e.g. %s", s, DefaultRange)
	}
	return r, r.Check()
}

// Check refuses ranges that reach system or common user uids.
func (r Range) Check() error {
	switch {
	case r.First > r.Last:
		return fmt.Errorf("uid range %s is empty", r)
	case r.First < 100000:
		return fmt.Errorf("uid range %s starts below 100000, among system and login uids", r)
	case r.Last >= 1<<31-1:
		return fmt.Errorf("uid range %s ends past 2147483646", r)
	}
	return nil
}

func (r Range) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last) }

const component = "sandbox_uids"

// One migration list serves both databases: the SQL is the same.
var migrations = []db.Migration{{
	Version: 1, Name: "create sandbox_uids",
	SQL: `CREATE TABLE sandbox_uids (
	chat_key TEXT   NOT NULL PRIMARY KEY,
	uid      BIGINT NOT NULL UNIQUE
)`,
}}

// Allocator hands out chat uids.
type Allocator struct {
	w *sql.DB
	// postgres: allocations take allocationLockID, so replicas sharing
	// the database never pick the same free uid at once.
	postgres bool
	close    func() error // releases w
	rng      Range
	mu       sync.Mutex
	cache    map[string]int // at most cacheMax chats' uids
	cacheMax int
}

// defaultCacheMax bounds the uids kept in memory: a chat past it asks the
// database again (one indexed read), so a server that has seen a million
// chats holds no entry per chat (issue 26).
const defaultCacheMax = 8192

// Open migrates the table on h and returns an allocator over rng.
func Open(ctx context.Context, h db.Handle, rng Range) (*Allocator, error) {
	if err := rng.Check(); err != nil {
		return nil, err
	}
	w, closeFn, err := db.Writer(ctx, h, component, migrations)
	if err != nil {
		return nil, fmt.Errorf("sandbox uids: %w", err)
	}
	return &Allocator{w: w, postgres: h.Postgres != nil, close: closeFn, rng: rng, cache: map[string]int{}, cacheMax: defaultCacheMax}, nil
}

// Close releases the allocator's own handle; the database stays open.
func (a *Allocator) Close() error {
	return a.close()
}

// Range returns the range uids come from.
func (a *Allocator) Range() Range { return a.rng }

// String names the range uids come from, as Range.String does.
func (a *Allocator) String() string { return a.Range().String() }

// UID returns chatKey's uid, allocating the lowest free one of the range
// on first use (or when the chat's recorded uid lies outside the current
// range, after the operator moved it).
func (a *Allocator) UID(ctx context.Context, chatKey string) (int, error) {
	a.mu.Lock()
	uid, ok := a.cache[chatKey]
	a.mu.Unlock()
	if ok {
		return uid, nil
	}
	var err error
	// Allocations are serialised in the database (PostgreSQL's advisory
	// lock, SQLite's one writer), so they do not race; a transaction
	// that still fails (SQLite busy under another process, a serialization
	// failure) is tried again after a short pause.
	for attempt := range 8 {
		if uid, err = a.allocate(ctx, chatKey); err == nil {
			a.mu.Lock()
			if len(a.cache) >= a.cacheMax {
				for k := range a.cache { // any one: a map's order is random
					delete(a.cache, k)
					break
				}
			}
			a.cache[chatKey] = uid
			a.mu.Unlock()
			return uid, nil
		}
		if errors.Is(err, errExhausted) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt+1) * 10 * time.Millisecond):
		}
	}
	return 0, fmt.Errorf("uid for chat %q: %w", chatKey, err)
}

// allocationLockID is the PostgreSQL advisory lock held while a uid is
// chosen: any constant shared by every nekro process works ("nekro uid").
const allocationLockID = 0x6e656b726f756964

var errExhausted = errors.New("every uid of the range is taken")

func (a *Allocator) allocate(ctx context.Context, chatKey string) (int, error) {
	tx, err := a.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	uid, known, err := a.recorded(ctx, tx, chatKey)
	if err != nil {
		return 0, err
	}
	if known {
		return uid, tx.Commit()
	}
	if a.postgres {
		// Choose under the lock, and look again: another replica may have
		// given this chat its uid while this one waited.
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(allocationLockID)); err != nil {
			return 0, err
		}
		if uid, known, err = a.recorded(ctx, tx, chatKey); err != nil {
			return 0, err
		}
		if known {
			return uid, tx.Commit()
		}
	}
	// The lowest free uid: the range's first, or one past a taken uid
	// whose successor is free.
	var free sql.NullInt64
	err = tx.QueryRowContext(ctx, `
SELECT MIN(c) FROM (
	SELECT CAST($1 AS BIGINT) AS c WHERE NOT EXISTS (SELECT 1 FROM sandbox_uids WHERE uid = $1)
	UNION ALL
	SELECT s.uid + 1 FROM sandbox_uids s
	WHERE s.uid >= $1 AND s.uid < $2
	  AND NOT EXISTS (SELECT 1 FROM sandbox_uids t WHERE t.uid = s.uid + 1)
) free`, a.rng.First, a.rng.Last).Scan(&free)
	if err != nil {
		return 0, err
	}
	if !free.Valid {
		return 0, fmt.Errorf("%w (%s): widen it with --sandbox-uids", errExhausted, a.rng)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO sandbox_uids (chat_key, uid) VALUES ($1, $2)
		ON CONFLICT (chat_key) DO UPDATE SET uid = excluded.uid`, chatKey, free.Int64); err != nil {
		return 0, err
	}
	return int(free.Int64), tx.Commit()
}

// recorded returns chatKey's recorded uid when it lies in the range.
func (a *Allocator) recorded(ctx context.Context, tx *sql.Tx, chatKey string) (uid int, ok bool, err error) {
	err = tx.QueryRowContext(ctx, `SELECT uid FROM sandbox_uids WHERE chat_key = $1`, chatKey).Scan(&uid)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, err
	}
	return uid, uid >= a.rng.First && uid <= a.rng.Last, nil
}
