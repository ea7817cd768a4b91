package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"

	_ "modernc.org/sqlite" // registers the "sqlite" driver (backups and tests open files with it)
)

// SQLiteOptions tunes an embedded database.
type SQLiteOptions struct {
	// FullSync makes every commit wait for fsync (synchronous=FULL): a
	// write then survives a power loss too, at about 0.2-0.5 ms per write.
	// The default, synchronous=NORMAL in WAL mode, makes a write durable
	// against any crash of the process (kill -9 included) as soon as its
	// commit returns, because the commit is in the operating system's
	// page cache; only a power loss or kernel crash can lose the last
	// commits before the next checkpoint. The database is never corrupted
	// either way.
	FullSync bool
	// Readers is the size of the read pool; 0 means max(4, GOMAXPROCS).
	// The writer caches up to 64 MiB of pages, each reader 16 MiB and maps
	// up to 1 GiB of the file.
	Readers int
}

// SQLite is an embedded database file in WAL mode, with one writer
// connection and a pool of readers. SQLite admits one writer at a time, so
// a single writer connection queues writes in the process instead of
// letting them collide on the file lock; readers never wait for it.
type SQLite struct {
	Path string
	// Write has one connection. Its transactions begin IMMEDIATE, taking
	// the write lock up front, so a transaction that reads and then writes
	// cannot fail halfway with SQLITE_BUSY. Another process's writer (the
	// nekro CLI while the server runs) waits up to 10 s for the lock.
	Write *sql.DB
	// Read is a pool of read-only connections.
	Read *sql.DB
}

// OpenSQLite opens (creating it and its directory if needed) the database
// file at path.
func OpenSQLite(ctx context.Context, path string, opts SQLiteOptions) (*SQLite, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	// The database holds every plugin's KV data and every chat: only its
	// owner may read it. SQLite creates the -wal and -shm files with the
	// database file's mode, so fixing that one (and any left over) is enough.
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("open sqlite %s: %w", path, err)
		}
	}
	sync := "NORMAL"
	if opts.FullSync {
		sync = "FULL"
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+sync+")")
	q.Add("_pragma", "foreign_keys(ON)")
	base := "file:" + (&url.URL{Path: path}).EscapedPath()

	wq := url.Values{}
	for k, v := range q {
		wq[k] = v
	}
	wq.Set("_txlock", "immediate")
	// The writer reads every page it changes: a cache big enough for the
	// hot part of the file halves a write's cost (SQLite's default is 2 MiB).
	wq.Add("_pragma", "cache_size(-65536)")
	w, err := openCaching(base + "?" + wq.Encode())
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	// The first connection switches the file to WAL; do it before readers
	// open so they never see a rollback-journal database.
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	var mode string
	if err := w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		w.Close()
		return nil, fmt.Errorf("open sqlite %s: journal mode is %q, not wal: %v", path, mode, err)
	}

	n := opts.Readers
	if n <= 0 {
		n = max(4, runtime.GOMAXPROCS(0))
	}
	rq := url.Values{}
	rq.Add("_pragma", "busy_timeout(10000)")
	rq.Add("_pragma", "query_only(1)")
	rq.Add("_pragma", "cache_size(-16384)")
	// Readers map the file: a page missing from the cache is then a memory
	// read, not a pread call, which keeps a get's cost flat as the file
	// outgrows the cache (measured: 1M keys cost ~1.3x 10k keys, ~1.6x
	// without). Only the address space is reserved.
	rq.Add("_pragma", "mmap_size(1073741824)")
	r, err := openCaching(base + "?" + rq.Encode())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	r.SetConnMaxLifetime(0)
	r.SetConnMaxIdleTime(0)
	return &SQLite{Path: path, Write: w, Read: r}, nil
}

// openCaching is sql.Open("sqlite", dsn) whose connections keep the
// statements they run prepared (stmtcache.go).
func openCaching(dsn string) (*sql.DB, error) {
	c, err := newCachingConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

// Close closes both pools.
func (d *SQLite) Close() error {
	err1 := d.Read.Close()
	err2 := d.Write.Close()
	if err1 != nil {
		return fmt.Errorf("close sqlite %s: %w", d.Path, err1)
	}
	if err2 != nil {
		return fmt.Errorf("close sqlite %s: %w", d.Path, err2)
	}
	return nil
}

// IntegrityCheck runs PRAGMA integrity_check and returns an error listing
// the problems it reports.
func (d *SQLite) IntegrityCheck(ctx context.Context) error {
	rows, err := d.Read.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return fmt.Errorf("integrity check: %w", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return fmt.Errorf("integrity check: %w", err)
		}
		if s != "ok" {
			problems = append(problems, s)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("integrity check: %w", err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("integrity check of %s failed: %q", d.Path, problems)
	}
	return nil
}

const sqliteMigrationsTable = `CREATE TABLE IF NOT EXISTS nekro_migrations (
	component  TEXT    NOT NULL,
	version    INTEGER NOT NULL,
	name       TEXT    NOT NULL,
	applied_at TEXT    NOT NULL,
	PRIMARY KEY (component, version)
) STRICT`

// MigrateSQLite brings component's tables up to date with ms.
func MigrateSQLite(ctx context.Context, d *SQLite, component string, ms []Migration) (err error) {
	if err := checkList(component, ms); err != nil {
		return err
	}
	tx, err := d.Write.BeginTx(ctx, nil) // BEGIN IMMEDIATE: holds the write lock
	if err != nil {
		return fmt.Errorf("migrate %s: %w", component, err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	if _, err := tx.ExecContext(ctx, sqliteMigrationsTable); err != nil {
		return fmt.Errorf("migrate %s: %w", component, err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT version, name FROM nekro_migrations WHERE component = ? ORDER BY version`, component)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", component, err)
	}
	var done []applied
	for rows.Next() {
		var a applied
		if err := rows.Scan(&a.version, &a.name); err != nil {
			rows.Close()
			return fmt.Errorf("migrate %s: %w", component, err)
		}
		done = append(done, a)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("migrate %s: %w", component, err)
	}
	todo, err := pending(component, ms, done)
	if err != nil {
		return err
	}
	for _, m := range todo {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("migrate %s to version %d (%s): %w", component, m.Version, m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO nekro_migrations (component, version, name, applied_at) VALUES (?, ?, ?, ?)`,
			component, m.Version, m.Name, nowText()); err != nil {
			return fmt.Errorf("migrate %s: record version %d: %w", component, m.Version, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate %s: %w", component, err)
	}
	return nil
}
