package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// openTestSQLite opens a fresh database with a table t(k, v).
func openTestSQLite(t testing.TB) *SQLite {
	t.Helper()
	ctx := context.Background()
	d, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "x.db"), SQLiteOptions{Readers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if _, err := d.Write.ExecContext(ctx, `CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL UNIQUE)`); err != nil {
		t.Fatal(err)
	}
	return d
}

func count(t *testing.T, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, query string, args ...any) int {
	t.Helper()
	var n int
	if err := q.QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// Statements kept prepared behave as statements prepared anew: the same
// text run again with other arguments, inside a query of the same text
// still reading, after a failure, after the schema changed, past the
// cache's bound, after a cancelled query, and as a script of several.
func TestKeptStatementsBehaveAsFreshOnes(t *testing.T) {
	ctx := context.Background()
	d := openTestSQLite(t)
	w := d.Write
	const ins = `INSERT INTO t (k, v) VALUES (?, ?)`
	for i := 1; i <= 5; i++ {
		if _, err := w.ExecContext(ctx, ins, i, fmt.Sprint("v", i)); err != nil {
			t.Fatal(err)
		}
	}
	// A failure (UNIQUE) leaves the statement usable.
	if _, err := w.ExecContext(ctx, ins, 6, "v1"); err == nil {
		t.Fatal("a duplicate value was accepted")
	}
	if _, err := w.ExecContext(ctx, ins, 6, "v6"); err != nil {
		t.Fatalf("the insert after a failed one: %v", err)
	}
	// The insert is kept prepared on the writer's connection.
	kept := func(query string) bool {
		conn, err := w.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ok := false
		conn.Raw(func(dc any) error {
			_, ok = dc.(*cachingConn).stmts[query]
			return nil
		})
		return ok
	}
	if !kept(ins) {
		t.Error("the insert was not kept prepared")
	}
	const sel = `SELECT count(*) FROM t WHERE k >= ?`
	if n := count(t, w, sel, 3); n != 4 {
		t.Errorf("k >= 3: %d rows, want 4", n)
	}
	if n := count(t, w, sel, 6); n != 1 {
		t.Errorf("k >= 6: %d rows, want 1", n)
	}

	// The same text again while its first rows are still open, on the
	// same connection (a transaction's).
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	const list = `SELECT k FROM t WHERE k <= ? ORDER BY k`
	outer, err := tx.QueryContext(ctx, list, 3)
	if err != nil {
		t.Fatal(err)
	}
	var pairs []string
	for outer.Next() {
		var k int
		if err := outer.Scan(&k); err != nil {
			t.Fatal(err)
		}
		inner, err := tx.QueryContext(ctx, list, k)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for inner.Next() {
			n++
		}
		if err := inner.Close(); err != nil {
			t.Fatal(err)
		}
		pairs = append(pairs, fmt.Sprintf("%d:%d", k, n))
	}
	if err := outer.Err(); err != nil {
		t.Fatal(err)
	}
	outer.Close()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(pairs); got != "[1:1 2:2 3:3]" {
		t.Errorf("nested queries of one text: %s, want [1:1 2:2 3:3]", got)
	}

	// A schema change: the kept SELECT * sees the new column.
	const star = `SELECT * FROM t WHERE k = 1`
	cols := func() int {
		rows, err := w.QueryContext(ctx, star)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		c, _ := rows.Columns()
		return len(c)
	}
	if n := cols(); n != 2 {
		t.Fatalf("%d columns before the change", n)
	}
	if _, err := w.ExecContext(ctx, `ALTER TABLE t ADD COLUMN extra TEXT`); err != nil {
		t.Fatal(err)
	}
	if n := cols(); n != 3 {
		t.Errorf("%d columns after ALTER TABLE ADD COLUMN, want 3", n)
	}

	// More distinct statements than the cache keeps, twice over.
	for round := 0; round < 2; round++ {
		for i := 0; i < stmtCacheSize+20; i++ {
			if n := count(t, w, fmt.Sprintf(`SELECT count(*) + %d FROM t`, i)); n != 6+i {
				t.Fatalf("statement %d: %d", i, n)
			}
		}
	}

	// A query cancelled while it runs; the statement then answers again.
	const slow = `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c WHERE x < ?`
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	var n int
	err = w.QueryRowContext(cctx, slow, 1).Scan(&n)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) && (err == nil || err.Error() != "interrupted (9)") {
		t.Fatalf("endless query: %v, want it cancelled", err)
	}
	if n := count(t, w, `SELECT count(*) FROM t WHERE k < ?`, 100); n != 6 {
		t.Errorf("after a cancelled query: %d rows", n)
	}

	// A script of several statements runs them all.
	if _, err := w.ExecContext(ctx, `INSERT INTO t (k, v) VALUES (7, 'v7'); INSERT INTO t (k, v) VALUES (8, 'v8')`); err != nil {
		t.Fatal(err)
	}
	if n := count(t, d.Read, `SELECT count(*) FROM t`); n != 8 {
		t.Errorf("after a two-statement script: %d rows, want 8", n)
	}
}

// BenchmarkQuery is a small indexed query on a connection that keeps it
// prepared against one that prepares it at every call (the driver's own
// sql.Open), in the same run.
func BenchmarkQuery(b *testing.B) {
	ctx := context.Background()
	d := openTestSQLite(b)
	for i := range 100 {
		if _, err := d.Write.ExecContext(ctx, `INSERT INTO t (k, v) VALUES (?, ?)`, i, fmt.Sprint("v", i)); err != nil {
			b.Fatal(err)
		}
	}
	plain, err := sql.Open("sqlite", "file:"+d.Path+"?_pragma=query_only(1)")
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	plain.SetMaxOpenConns(1)
	const q = `SELECT v FROM t WHERE k = ? AND v LIKE 'v%' ORDER BY k LIMIT 1`
	for _, c := range []struct {
		name string
		db   *sql.DB
	}{{"prepared_each_time", plain}, {"kept_prepared", d.Read}} {
		b.Run(c.name, func(b *testing.B) {
			var v string
			i := 0
			for b.Loop() {
				if err := c.db.QueryRowContext(ctx, q, i%100).Scan(&v); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
