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
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
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

	get, list, usage *sql.Stmt // on the readers

	wmu sync.Mutex
	ws  map[any]*wstmts // the writer's statements, by driver connection
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

// Apply implements kv.Engine. It works on the writer's driver connection
// directly, with statements prepared once on it (BEGIN and COMMIT too):
// database/sql's transaction machinery cost as much as the SQL itself.
func (e *Engine) Apply(ctx context.Context, k kv.Key, withUsage bool, fn kv.ApplyFunc) error {
	c, err := e.d.Write.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlite writer: %w", err)
	}
	defer c.Close()
	return c.Raw(func(dc any) error { return e.apply(ctx, dc, k, withUsage, fn) })
}

// wstmts are the writer's statements on one driver connection.
type wstmts struct {
	begin, commit, rollback, get, usage, upsert, del driver.Stmt
}

func (w *wstmts) close() {
	for _, s := range []driver.Stmt{w.begin, w.commit, w.rollback, w.get, w.usage, w.upsert, w.del} {
		if s != nil {
			s.Close()
		}
	}
}

// writerStmts returns the statements prepared on dc, preparing them on
// first use. The writer pool has one connection, replaced only if it
// breaks.
func (e *Engine) writerStmts(dc any) (*wstmts, error) {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	if w := e.ws[dc]; w != nil {
		return w, nil
	}
	conn, ok := dc.(driver.Conn)
	if !ok {
		return nil, fmt.Errorf("driver connection %T is not a driver.Conn", dc)
	}
	w := &wstmts{}
	var err error
	prep := func(dst *driver.Stmt, q string) {
		if err == nil {
			*dst, err = conn.Prepare(q)
		}
	}
	const where = ` WHERE plugin = ? AND chat_key = ? AND user_key = ? AND store_key = ?`
	prep(&w.begin, `BEGIN IMMEDIATE`)
	prep(&w.commit, `COMMIT`)
	prep(&w.rollback, `ROLLBACK`)
	prep(&w.get, `SELECT value, size, expires_at FROM kv`+where)
	prep(&w.usage, `SELECT bytes, keys FROM kv_usage WHERE plugin = ?`)
	prep(&w.upsert, `INSERT INTO kv (plugin, chat_key, user_key, store_key, value, size, expires_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (plugin, chat_key, user_key, store_key) DO UPDATE SET
			value = excluded.value, size = excluded.size, expires_at = excluded.expires_at, updated_at = excluded.updated_at`)
	prep(&w.del, `DELETE FROM kv`+where)
	if err != nil {
		w.close()
		return nil, fmt.Errorf("sqlite prepare: %w", err)
	}
	if e.ws == nil {
		e.ws = map[any]*wstmts{}
	}
	e.ws[dc] = w
	return w, nil
}

func named(vs ...any) []driver.NamedValue {
	out := make([]driver.NamedValue, len(vs))
	for i, v := range vs {
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return out
}

func execStmt(ctx context.Context, s driver.Stmt, args ...any) error {
	_, err := s.(driver.StmtExecContext).ExecContext(ctx, named(args...))
	return err
}

// queryRow runs s and scans its first row into dest; found is false when
// there is none.
func queryRow(s driver.Stmt, dest []driver.Value, args ...any) (found bool, err error) {
	rows, err := s.(driver.StmtQueryContext).QueryContext(context.Background(), named(args...))
	if err != nil {
		return false, err
	}
	defer rows.Close()
	switch err := rows.Next(dest); {
	case errors.Is(err, io.EOF):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

func (e *Engine) apply(ctx context.Context, dc any, k kv.Key, withUsage bool, fn kv.ApplyFunc) (err error) {
	w, err := e.writerStmts(dc)
	if err != nil {
		return err
	}
	// BEGIN IMMEDIATE may wait for another process's write lock; ctx ends
	// that wait. Inside the transaction nothing waits, so the statements
	// run without the per-call watcher a cancellable context costs.
	if err := execStmt(ctx, w.begin); err != nil {
		return fmt.Errorf("sqlite begin: %w", err)
	}
	bg := context.Background()
	done := false
	defer func() {
		if done {
			return
		}
		rbErr := execStmt(bg, w.rollback)
		if rbErr != nil && !strings.Contains(rbErr.Error(), "no transaction is active") {
			// A connection stuck in a transaction would fail every later
			// write: have the pool replace it.
			e.wmu.Lock()
			delete(e.ws, dc)
			e.wmu.Unlock()
			err = errors.Join(err, fmt.Errorf("sqlite rollback: %w", rbErr), driver.ErrBadConn)
		}
	}()
	var cur kv.Entry
	dest := make([]driver.Value, 3)
	found, err := queryRow(w.get, dest, k.Plugin, k.Chat, k.User, k.Name)
	if err != nil {
		return fmt.Errorf("sqlite read: %w", err)
	}
	if found {
		v, _ := dest[0].([]byte)
		size, _ := dest[1].(int64)
		exp, _ := dest[2].(int64)
		cur = kv.Entry{Key: k, Value: string(v), Size: size, ExpiresAt: fromMillis(exp)}
	}
	var u kv.Usage
	if withUsage {
		if ok, err := queryRow(w.usage, dest[:2], k.Plugin); err != nil {
			return fmt.Errorf("sqlite usage: %w", err)
		} else if ok {
			u.Bytes, _ = dest[0].(int64)
			u.Keys, _ = dest[1].(int64)
		}
	}
	ch, err := fn(cur, found, u)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	switch ch.Op {
	case kv.Keep:
		return nil // the deferred rollback ends the transaction
	case kv.Put:
		err = execStmt(bg, w.upsert, k.Plugin, k.Chat, k.User, k.Name,
			[]byte(ch.Value), kv.Size(k.Name, ch.Value), millis(ch.ExpiresAt), time.Now().UnixMilli())
	case kv.Remove:
		if !found {
			return nil
		}
		err = execStmt(bg, w.del, k.Plugin, k.Chat, k.User, k.Name)
	default:
		err = fmt.Errorf("unknown op %d", ch.Op)
	}
	if err != nil {
		return fmt.Errorf("sqlite write: %w", err)
	}
	if err := execStmt(bg, w.commit); err != nil {
		return fmt.Errorf("sqlite commit: %w", err)
	}
	done = true
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

// Plugins implements kv.Engine.
func (e *Engine) Plugins(ctx context.Context) ([]string, error) {
	rows, err := e.d.Read.QueryContext(ctx, `SELECT plugin FROM kv_usage WHERE keys > 0 ORDER BY plugin`)
	if err != nil {
		return nil, fmt.Errorf("sqlite plugins: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, fmt.Errorf("sqlite plugins: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
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
	for _, s := range []*sql.Stmt{e.get, e.list, e.usage} {
		if s != nil {
			s.Close()
		}
	}
	// The writer's statements live on its connection: close them there.
	if c, err := e.d.Write.Conn(context.Background()); err == nil {
		c.Raw(func(dc any) error {
			e.wmu.Lock()
			defer e.wmu.Unlock()
			if w := e.ws[dc]; w != nil {
				w.close()
			}
			e.ws = nil
			return nil
		})
		c.Close()
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
