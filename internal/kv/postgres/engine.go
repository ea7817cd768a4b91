// Package postgres is the KV engine on PostgreSQL, through pgx. It is
// chosen by a database URL (config or NEKRO_DATABASE_URL) and suits
// several nekro processes sharing one store.
//
// Durability: a write is committed when its call returns, with the
// server's settings (synchronous_commit on by default: flushed to the WAL
// on disk).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/kv"
)

// Engine stores KV rows in PostgreSQL. Apply takes a transaction-scoped
// advisory lock on the key's hash before reading it, so read-modify-write
// is atomic even for a key that does not exist yet (a row lock cannot
// cover a missing row); two keys sharing a hash only wait for each other.
type Engine struct {
	pool *pgxpool.Pool
	own  bool
}

var _ kv.Engine = (*Engine)(nil)

// Open connects to url, migrates the database and returns an engine that
// owns the pool.
func Open(ctx context.Context, url string) (*Engine, error) {
	pool, err := db.OpenPostgres(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("kv postgres: %w", err)
	}
	e, err := New(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	e.own = true
	return e, nil
}

// New migrates a pool shared with other components and returns an engine
// on it. Closing the engine leaves the pool open.
func New(ctx context.Context, pool *pgxpool.Pool) (*Engine, error) {
	if err := db.MigratePostgres(ctx, pool, Component, Migrations); err != nil {
		return nil, fmt.Errorf("kv postgres: %w", err)
	}
	return &Engine{pool: pool}, nil
}

// Pool returns the engine's connection pool.
func (e *Engine) Pool() *pgxpool.Pool { return e.pool }

func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

const whereKey = ` WHERE plugin = $1 AND chat_key = $2 AND user_key = $3 AND store_key = $4`

// Get implements kv.Engine.
func (e *Engine) Get(ctx context.Context, k kv.Key) (kv.Entry, bool, error) {
	var v []byte
	var exp int64
	err := e.pool.QueryRow(ctx, `SELECT value, expires_at FROM kv`+whereKey, k.Plugin, k.Chat, k.User, k.Name).Scan(&v, &exp)
	if errors.Is(err, pgx.ErrNoRows) {
		return kv.Entry{}, false, nil
	}
	if err != nil {
		return kv.Entry{}, false, fmt.Errorf("postgres get: %w", err)
	}
	return kv.Entry{Key: k, Value: string(v), ExpiresAt: fromMillis(exp), Size: kv.Size(k.Name, string(v))}, true, nil
}

// lockID is the advisory lock of a key.
func lockID(k kv.Key) int64 {
	h := fnv.New64a()
	for _, s := range []string{k.Plugin, k.Chat, k.User, k.Name} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return int64(h.Sum64())
}

// Apply implements kv.Engine.
func (e *Engine) Apply(ctx context.Context, k kv.Key, withUsage bool, fn kv.ApplyFunc) error {
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // no-op after Commit

	// Lock order, the same in every transaction: the key's advisory lock,
	// its row, then the plugin's usage row.
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock($1)`, lockID(k))
	b.Queue(`SELECT id, value, size, expires_at FROM kv`+whereKey+` FOR UPDATE`, k.Plugin, k.Chat, k.User, k.Name)
	if withUsage {
		b.Queue(`INSERT INTO kv_usage (plugin, bytes, keys) VALUES ($1, 0, 0) ON CONFLICT (plugin) DO NOTHING`, k.Plugin)
		b.Queue(`SELECT bytes, keys FROM kv_usage WHERE plugin = $1 FOR UPDATE`, k.Plugin)
	}
	br := tx.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return fmt.Errorf("postgres lock: %w", err)
	}
	var id int64
	var cur kv.Entry
	var v []byte
	var exp int64
	found := true
	err = br.QueryRow().Scan(&id, &v, &cur.Size, &exp)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		found = false
	case err != nil:
		br.Close()
		return fmt.Errorf("postgres read: %w", err)
	default:
		cur.Key, cur.Value, cur.ExpiresAt = k, string(v), fromMillis(exp)
	}
	var u kv.Usage
	if withUsage {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return fmt.Errorf("postgres usage: %w", err)
		}
		if err := br.QueryRow().Scan(&u.Bytes, &u.Keys); err != nil {
			br.Close()
			return fmt.Errorf("postgres usage: %w", err)
		}
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("postgres read: %w", err)
	}

	ch, err := fn(cur, found, u)
	if err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	switch {
	case ch.Op == kv.Keep:
		return nil // the deferred rollback releases the locks
	case ch.Op == kv.Put && found:
		_, err = tx.Exec(ctx, `UPDATE kv SET value = $2, size = $3, expires_at = $4, updated_at = $5 WHERE id = $1`,
			id, []byte(ch.Value), kv.Size(k.Name, ch.Value), millis(ch.ExpiresAt), now)
	case ch.Op == kv.Put:
		_, err = tx.Exec(ctx, `INSERT INTO kv (plugin, chat_key, user_key, store_key, value, size, expires_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			k.Plugin, k.Chat, k.User, k.Name, []byte(ch.Value), kv.Size(k.Name, ch.Value), millis(ch.ExpiresAt), now)
	case ch.Op == kv.Remove && found:
		_, err = tx.Exec(ctx, `DELETE FROM kv WHERE id = $1`, id)
	case ch.Op == kv.Remove:
		return nil
	default:
		return fmt.Errorf("postgres: unknown op %d", ch.Op)
	}
	if err != nil {
		return fmt.Errorf("postgres write: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres commit: %w", err)
	}
	return nil
}

// List implements kv.Engine.
func (e *Engine) List(ctx context.Context, q kv.ListQuery) ([]kv.Entry, error) {
	end, ok := kv.PrefixEnd(q.Prefix)
	if !ok {
		end = "\U0010FFFF\U0010FFFF" // above every valid key
	}
	rows, err := e.pool.Query(ctx, `SELECT store_key, expires_at FROM kv
		WHERE plugin = $1 AND chat_key = $2 AND user_key = $3 AND store_key > $4 AND store_key >= $5 AND store_key < $6
		ORDER BY store_key LIMIT $7`, q.Plugin, q.Chat, q.User, q.After, q.Prefix, end, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("postgres list: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (kv.Entry, error) {
		var name string
		var exp int64
		err := r.Scan(&name, &exp)
		return kv.Entry{Key: kv.Key{Plugin: q.Plugin, Chat: q.Chat, User: q.User, Name: name}, ExpiresAt: fromMillis(exp)}, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres list: %w", err)
	}
	return out, nil
}

// retry runs a statement that calls no plugin code again when PostgreSQL
// aborts it for a deadlock or a serialization failure.
func retry(f func() (pgconn.CommandTag, error)) (pgconn.CommandTag, error) {
	for attempt := 0; ; attempt++ {
		tag, err := f()
		var pe *pgconn.PgError
		if attempt < 5 && errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001") {
			continue
		}
		return tag, err
	}
}

// DeleteScope implements kv.Engine.
func (e *Engine) DeleteScope(ctx context.Context, plugin, chat, user string) (int64, error) {
	q := `DELETE FROM kv WHERE plugin = $1`
	args := []any{plugin}
	if chat != "" {
		args = append(args, chat)
		q += fmt.Sprintf(` AND chat_key = $%d`, len(args))
	}
	if user != "" {
		args = append(args, user)
		q += fmt.Sprintf(` AND user_key = $%d`, len(args))
	}
	tag, err := retry(func() (pgconn.CommandTag, error) { return e.pool.Exec(ctx, q, args...) })
	if err != nil {
		return 0, fmt.Errorf("postgres delete scope: %w", err)
	}
	return tag.RowsAffected(), nil
}

// DeleteExpired implements kv.Engine. Rows another transaction holds are
// skipped, to be taken by the next sweep.
func (e *Engine) DeleteExpired(ctx context.Context, before time.Time, limit int) (int64, error) {
	tag, err := retry(func() (pgconn.CommandTag, error) {
		return e.pool.Exec(ctx, `DELETE FROM kv WHERE id IN
			(SELECT id FROM kv WHERE expires_at > 0 AND expires_at <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
			before.UnixMilli(), limit)
	})
	if err != nil {
		return 0, fmt.Errorf("postgres delete expired: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Usage implements kv.Engine.
func (e *Engine) Usage(ctx context.Context, plugin string) (kv.Usage, error) {
	var u kv.Usage
	err := e.pool.QueryRow(ctx, `SELECT bytes, keys FROM kv_usage WHERE plugin = $1`, plugin).Scan(&u.Bytes, &u.Keys)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return kv.Usage{}, fmt.Errorf("postgres usage: %w", err)
	}
	return u, nil
}

// Plugins implements kv.Engine.
func (e *Engine) Plugins(ctx context.Context) ([]string, error) {
	rows, err := e.pool.Query(ctx, `SELECT plugin FROM kv_usage WHERE keys > 0 ORDER BY plugin`)
	if err != nil {
		return nil, fmt.Errorf("postgres plugins: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres plugins: %w", err)
	}
	return out, nil
}

// Close implements kv.Engine. It closes the pool only if Open opened it.
func (e *Engine) Close(ctx context.Context) error {
	if e.own {
		e.pool.Close()
	}
	return nil
}
