// Package deliveries remembers the webhook deliveries nekro handled, in
// the database (SQLite or PostgreSQL, one portable schema), so a delivery
// sent again (a replay by whoever captured it, or a sender's retry of one
// that succeeded) runs no handler twice, whichever nekro process sharing
// the database receives it.
//
// A delivery is known by keys: the sender's delivery id (when it sends
// one) and, for a delivery authenticated by its signature, the SHA-256 of
// its body, which is what the signature covers: a delivery id is a header
// no signature covers, so an attacker replaying a signed body can change
// it at will, but cannot change the body. A delivery any of whose keys was
// claimed within Window is a duplicate. Keys are kept for Window and at
// most MaxKeys of them (the oldest go first), so the table stays small
// whatever the senders do.
package deliveries

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/nekro-go/nekro/internal/db"
)

const component = "webhook_deliveries"

// One migration list serves both databases: the SQL is the same.
var migrations = []db.Migration{
	{Version: 1, Name: "create webhook_deliveries", SQL: `CREATE TABLE webhook_deliveries (
	endpoint     TEXT   NOT NULL,
	delivery_key TEXT   NOT NULL,
	seen_ms      BIGINT NOT NULL,
	PRIMARY KEY (endpoint, delivery_key)
);
CREATE INDEX webhook_deliveries_seen ON webhook_deliveries (seen_ms)`},
}

const (
	// Window is how long a delivery's keys are kept: the same delivery
	// arriving again within it is a duplicate.
	Window = 72 * time.Hour
	// MaxKeys bounds the keys kept, across endpoints; past it the oldest
	// are forgotten first.
	MaxKeys = 100_000
)

// Store records claimed deliveries.
type Store struct {
	w       *sql.DB
	close   func() error
	now     func() time.Time
	maxKeys int64
}

// Open migrates the table on h.
func Open(ctx context.Context, h db.Handle) (*Store, error) {
	w, closeFn, err := db.Writer(ctx, h, component, migrations)
	if err != nil {
		return nil, fmt.Errorf("webhook deliveries: %w", err)
	}
	return &Store{w: w, close: closeFn, now: time.Now, maxKeys: MaxKeys}, nil
}

// Close releases the store's own handle; the database stays open.
func (s *Store) Close() error { return s.close() }

// Claim records a delivery to endpoint by its keys ("" ones are left
// out) and reports whether it is new. A delivery with no key is always
// new, and nothing is recorded. When one of its keys was claimed within
// Window, the delivery is a duplicate: Claim records nothing and returns
// false. Claims of one delivery by several processes at once end with
// one of them true.
func (s *Store) Claim(ctx context.Context, endpoint string, keys ...string) (bool, error) {
	var ks []string
	for _, k := range keys {
		if k != "" {
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		return true, nil
	}
	now := s.now().UnixMilli()
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("claim webhook delivery: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE seen_ms < $1`, now-Window.Milliseconds()); err != nil {
		return false, fmt.Errorf("claim webhook delivery: forget old ones: %w", err)
	}
	for _, k := range ks {
		res, err := tx.ExecContext(ctx,
			`INSERT INTO webhook_deliveries (endpoint, delivery_key, seen_ms) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
			endpoint, k, now)
		if err != nil {
			return false, fmt.Errorf("claim webhook delivery: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return false, nil // the rollback leaves this delivery's other keys unclaimed
		}
	}
	var count int64
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhook_deliveries`).Scan(&count); err != nil {
		return false, fmt.Errorf("claim webhook delivery: count: %w", err)
	}
	if over := count - s.maxKeys; over > 0 {
		if _, err := tx.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE (endpoint, delivery_key) IN
			(SELECT endpoint, delivery_key FROM webhook_deliveries ORDER BY seen_ms LIMIT $1)`, over); err != nil {
			return false, fmt.Errorf("claim webhook delivery: forget the oldest: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("claim webhook delivery: %w", err)
	}
	return true, nil
}

// Release forgets a claimed delivery's keys, so the sender's retry of a
// delivery whose handlers failed runs them again.
func (s *Store) Release(ctx context.Context, endpoint string, keys ...string) error {
	for _, k := range keys {
		if k == "" {
			continue
		}
		if _, err := s.w.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE endpoint = $1 AND delivery_key = $2`, endpoint, k); err != nil {
			return fmt.Errorf("release webhook delivery: %w", err)
		}
	}
	return nil
}
