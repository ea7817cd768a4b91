// Package sqlite is the embedded KV engine: a table in nekro's SQLite
// database (data/nekro.db), through the pure-Go modernc.org/sqlite driver.
//
// Durability: the database runs in WAL mode with synchronous=NORMAL (see
// db.SQLiteOptions). A write is committed when its call returns and then
// survives any crash of the process, SIGKILL included; a power loss can
// lose the last commits but never corrupts the file. FullSync extends the
// guarantee to power loss at the cost of an fsync per write.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/kv"
)

// Engine stores KV rows in SQLite. Writes go through the database's single
// writer connection in IMMEDIATE transactions, which serializes every
// Apply on the file (across processes too), so read-modify-write needs no
// further locking. Reads use the reader pool and never wait for writers.
type Engine struct {
	d   *db.SQLite
	own bool

	get, list, usage          *sql.Stmt // on the readers
	wGet, wUsage, upsert, del *sql.Stmt // on the writer
}

var _ kv.Engine = (*Engine)(nil)

// Open opens (creating if needed) the database file at path, migrates it
// and returns an engine that owns it.
func Open(ctx context.Context, path string, opts db.SQLiteOptions) (*Engine, error) {
	d, err := db.OpenSQLite(ctx, path, opts)
	if err != nil {
		return nil, fmt.Errorf("kv sqlite: %w", err)
	}
	e, err := New(ctx, d)
	if err != nil {
		d.Close()
		return nil, err
	}
	e.own = true
	return e, nil
}

// New migrates an open database shared with other components and returns
// an engine on it. Closing the engine leaves d open.
func New(ctx context.Context, d *db.SQLite) (*Engine, error) {
	if err := db.MigrateSQLite(ctx, d, Component, Migrations); err != nil {
		return nil, fmt.Errorf("kv sqlite: %w", err)
	}
	e := &Engine{d: d}
	var err error
	prep := func(on *sql.DB, dst **sql.Stmt, q string) error {
		if err != nil {
			return err
		}
		*dst, err = on.PrepareContext(ctx, q)
		return err
	}
	const where = ` WHERE plugin = ? AND chat_key = ? AND user_key = ? AND store_key = ?`
	prep(d.Read, &e.get, `SELECT value, expires_at FROM kv`+where)
	prep(d.Read, &e.list, `SELECT store_key, expires_at FROM kv
		WHERE plugin = ? AND chat_key = ? AND user_key = ? AND store_key > ? AND store_key >= ? AND store_key < ?
		ORDER BY store_key LIMIT ?`)
	prep(d.Read, &e.usage, `SELECT bytes, keys FROM kv_usage WHERE plugin = ?`)
	prep(d.Write, &e.wGet, `SELECT value, size, expires_at FROM kv`+where)
	prep(d.Write, &e.wUsage, `SELECT bytes, keys FROM kv_usage WHERE plugin = ?`)
	prep(d.Write, &e.upsert, `INSERT INTO kv (plugin, chat_key, user_key, store_key, value, size, expires_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (plugin, chat_key, user_key, store_key) DO UPDATE SET
			value = excluded.value, size = excluded.size, expires_at = excluded.expires_at, updated_at = excluded.updated_at`)
	prep(d.Write, &e.del, `DELETE FROM kv`+where)
	if err != nil {
		e.closeStmts()
		return nil, fmt.Errorf("kv sqlite: prepare: %w", err)
	}
	return e, nil
}

// DB returns the engine's database.
func (e *Engine) DB() *db.SQLite { return e.d }

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

// Get implements kv.Engine.
func (e *Engine) Get(ctx context.Context, k kv.Key) (kv.Entry, bool, error) {
	var v []byte
	var exp int64
	err := e.get.QueryRowContext(ctx, k.Plugin, k.Chat, k.User, k.Name).Scan(&v, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		return kv.Entry{}, false, nil
	}
	if err != nil {
		return kv.Entry{}, false, fmt.Errorf("sqlite get: %w", err)
	}
	return kv.Entry{Key: k, Value: string(v), ExpiresAt: fromMillis(exp), Size: kv.Size(k.Name, string(v))}, true, nil
}

// Apply implements kv.Engine.
func (e *Engine) Apply(ctx context.Context, k kv.Key, withUsage bool, fn kv.ApplyFunc) (err error) {
	tx, err := e.d.Write.BeginTx(ctx, nil) // BEGIN IMMEDIATE
	if err != nil {
		return fmt.Errorf("sqlite begin: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	var cur kv.Entry
	var v []byte
	var exp int64
	found := true
	err = tx.StmtContext(ctx, e.wGet).QueryRowContext(ctx, k.Plugin, k.Chat, k.User, k.Name).Scan(&v, &cur.Size, &exp)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		found, cur = false, kv.Entry{}
	case err != nil:
		return fmt.Errorf("sqlite read: %w", err)
	default:
		cur.Key, cur.Value, cur.ExpiresAt = k, string(v), fromMillis(exp)
	}
	var u kv.Usage
	if withUsage {
		err = tx.StmtContext(ctx, e.wUsage).QueryRowContext(ctx, k.Plugin).Scan(&u.Bytes, &u.Keys)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite usage: %w", err)
		}
	}
	ch, err := fn(cur, found, u)
	if err != nil {
		return err
	}
	switch ch.Op {
	case kv.Keep:
		return tx.Rollback() // nothing written; releases the lock
	case kv.Put:
		_, err = tx.StmtContext(ctx, e.upsert).ExecContext(ctx, k.Plugin, k.Chat, k.User, k.Name,
			[]byte(ch.Value), kv.Size(k.Name, ch.Value), millis(ch.ExpiresAt), time.Now().UnixMilli())
	case kv.Remove:
		_, err = tx.StmtContext(ctx, e.del).ExecContext(ctx, k.Plugin, k.Chat, k.User, k.Name)
	default:
		err = fmt.Errorf("unknown op %d", ch.Op)
	}
	if err != nil {
		return fmt.Errorf("sqlite write: %w", err)
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("sqlite commit: %w", err)
	}
	return nil
}

// List implements kv.Engine.
func (e *Engine) List(ctx context.Context, q kv.ListQuery) ([]kv.Entry, error) {
	end, ok := kv.PrefixEnd(q.Prefix)
	if !ok {
		end = "\U0010FFFF\U0010FFFF" // above every valid key
	}
	rows, err := e.list.QueryContext(ctx, q.Plugin, q.Chat, q.User, q.After, q.Prefix, end, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite list: %w", err)
	}
	defer rows.Close()
	var out []kv.Entry
	for rows.Next() {
		var name string
		var exp int64
		if err := rows.Scan(&name, &exp); err != nil {
			return nil, fmt.Errorf("sqlite list: %w", err)
		}
		out = append(out, kv.Entry{Key: kv.Key{Plugin: q.Plugin, Chat: q.Chat, User: q.User, Name: name}, ExpiresAt: fromMillis(exp)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite list: %w", err)
	}
	return out, nil
}

// DeleteScope implements kv.Engine.
func (e *Engine) DeleteScope(ctx context.Context, plugin, chat, user string) (int64, error) {
	q := `DELETE FROM kv WHERE plugin = ?`
	args := []any{plugin}
	if chat != "" {
		q += ` AND chat_key = ?`
		args = append(args, chat)
	}
	if user != "" {
		q += ` AND user_key = ?`
		args = append(args, user)
	}
	res, err := e.d.Write.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("sqlite delete scope: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// DeleteExpired implements kv.Engine.
func (e *Engine) DeleteExpired(ctx context.Context, before time.Time, limit int) (int64, error) {
	res, err := e.d.Write.ExecContext(ctx, `DELETE FROM kv WHERE rowid IN
		(SELECT rowid FROM kv WHERE expires_at > 0 AND expires_at <= ? LIMIT ?)`, before.UnixMilli(), limit)
	if err != nil {
		return 0, fmt.Errorf("sqlite delete expired: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// Usage implements kv.Engine.
func (e *Engine) Usage(ctx context.Context, plugin string) (kv.Usage, error) {
	var u kv.Usage
	err := e.usage.QueryRowContext(ctx, plugin).Scan(&u.Bytes, &u.Keys)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return kv.Usage{}, fmt.Errorf("sqlite usage: %w", err)
	}
	return u, nil
}

func (e *Engine) closeStmts() {
	for _, s := range []*sql.Stmt{e.get, e.list, e.usage, e.wGet, e.wUsage, e.upsert, e.del} {
		if s != nil {
			s.Close()
		}
	}
}

// Close implements kv.Engine. It closes the database only if Open opened
// it.
func (e *Engine) Close(ctx context.Context) error {
	e.closeStmts()
	if e.own {
		if err := e.d.Close(); err != nil {
			return fmt.Errorf("kv sqlite: %w", err)
		}
	}
	return nil
}
