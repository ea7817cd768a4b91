// Package kvbench measures the KV store's engines through the kv.Store
// front, against an in-memory map behind the same front measured in the
// same run, and prints the figures as ratios.
package kvbench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/nekro-go/nekro/internal/bench/stats"
	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/kv"
	"github.com/nekro-go/nekro/internal/kv/postgres"
	"github.com/nekro-go/nekro/internal/kv/sqlite"
	"github.com/nekro-go/nekro/plugin"
)

// Options configure a run.
type Options struct {
	Dir         string        // scratch directory for SQLite files
	PostgresURL string        // "" skips PostgreSQL
	Keys        int           // keys per store for the 100-byte values
	LargeKeys   int           // keys per store for the 64 KiB values
	Ops         int           // at most this many gets, then sets, per case
	Budget      time.Duration // and at most this long per case
	ScaleSmall  int           // the flat-cost check: get p50 at ScaleSmall keys...
	ScaleLarge  int           // ...versus ScaleLarge keys
}

// Goals of issue 3, for SQLite.
const (
	goalGetP50 = 20 * time.Microsecond
	goalSetP50 = 40 * time.Microsecond
	goalScale  = 1.5
)

const benchPlugin = "nekro.bench"

// target is one engine under test.
type target struct {
	name string
	open func(ctx context.Context, tag string) (kv.Engine, error)
	// load inserts keys 0..n-1 with value v in bulk, bypassing the front.
	load func(ctx context.Context, e kv.Engine, n int, v string) error
}

func keyOf(i int) kv.Key {
	return kv.Key{Plugin: benchPlugin, Chat: "chat-" + strconv.Itoa(i%1000), Name: "key-" + strconv.Itoa(i)}
}

func randomValue(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return string(b)
}

// Run runs every case and prints the tables to w.
func Run(ctx context.Context, w io.Writer, o Options) error {
	r := &runner{o: o}
	targets := []target{memoryTarget(), sqliteTarget(o.Dir)}
	if o.PostgresURL != "" {
		pg, cleanup, err := postgresTarget(ctx, o.PostgresURL)
		if err != nil {
			return err
		}
		defer cleanup()
		targets = append(targets, pg)
	}
	fmt.Fprintf(w, "KV store through kv.Store, %s, %d CPUs; each case: as many warm-up gets, then up to %d ops or %s, keys picked uniformly at random\n\n",
		runtime.Version(), runtime.NumCPU(), o.Ops, o.Budget)

	for _, c := range []struct {
		size, keys int
	}{{100, o.Keys}, {64 << 10, o.LargeKeys}} {
		if c.keys <= 0 {
			continue
		}
		fmt.Fprintf(w, "%d keys of %s values (the map is the ceiling: same front, no storage)\n", c.keys, sizeName(c.size))
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "engine\top\tp50\tp99\tops/s\tp50 vs map\tgoal\t")
		var base [2]time.Duration
		for _, tg := range targets {
			res, err := r.measure(ctx, tg, c.keys, c.size)
			if err != nil {
				return fmt.Errorf("%s, %s values: %w", tg.name, sizeName(c.size), err)
			}
			for i, op := range []string{"get", "set"} {
				s := res[i]
				if tg.name == "map" {
					base[i] = s.P50
				}
				goal := ""
				if tg.name == "sqlite" && c.size == 100 {
					g := goalGetP50
					if op == "set" {
						g = goalSetP50
					}
					goal = fmt.Sprintf("p50 ≤ %s: %s", stats.Micros(g), okIf(s.P50 <= g))
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f\t%s\t%s\t\n", tg.name, op, stats.Micros(s.P50), stats.Micros(s.P99),
					s.PerSecond(), stats.Ratio(s.P50, base[i]), goal)
			}
		}
		tw.Flush()
		fmt.Fprintln(w)
	}

	if o.ScaleSmall > 0 && o.ScaleLarge > 0 {
		fmt.Fprintf(w, "Cost as the store grows: get p50 with 100 B values at %d vs %d keys (both stores open, timed in 5 alternating rounds)\n", o.ScaleSmall, o.ScaleLarge)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "engine\t%d keys\t%d keys\tratio\tgoal\t\n", o.ScaleSmall, o.ScaleLarge)
		for _, tg := range targets[1:] {
			small, large, err := r.scale(ctx, tg, o.ScaleSmall, o.ScaleLarge)
			if err != nil {
				return err
			}
			ratio := float64(large.P50) / float64(small.P50)
			goal := ""
			if tg.name == "sqlite" {
				goal = fmt.Sprintf("≤ %.1fx: %s", goalScale, okIf(ratio <= goalScale))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.2fx\t%s\t\n", tg.name, stats.Micros(small.P50), stats.Micros(large.P50), ratio, goal)
		}
		tw.Flush()
	}
	return nil
}

func okIf(b bool) string {
	if b {
		return "met"
	}
	return "MISSED"
}

func sizeName(n int) string {
	if n >= 1<<10 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// runner holds a run's state.
type runner struct {
	o     Options
	cases int // numbers each case's SQLite file and PostgreSQL schema
}

// kvcase is one loaded store under test.
type kvcase struct {
	ns    plugin.Store
	store *kv.Store
	n     int
	v     string
	rng   *mrand.Rand
}

// open opens a fresh store of n keys of size-byte values and warms it up
// with as many gets as are measured, within the budget: the first calls
// prepare statements, and the first touch of each page of a large file
// costs a page fault that a running server has long paid.
func (r *runner) open(ctx context.Context, tg target, n, size int) (*kvcase, error) {
	r.cases++
	eng, err := tg.open(ctx, fmt.Sprintf("%d_%d_%d", n, size, r.cases))
	if err != nil {
		return nil, err
	}
	v := randomValue(size)
	if err := tg.load(ctx, eng, n, v); err != nil {
		eng.Close(ctx)
		return nil, fmt.Errorf("load: %w", err)
	}
	st := kv.New(eng, kv.Options{Limits: kv.Limits{MaxValueBytes: -1}})
	c := &kvcase{ns: st.For(benchPlugin), store: st, n: n, v: v, rng: mrand.New(mrand.NewPCG(1, uint64(n)))}
	if _, err := c.time(ctx, c.get, r.o.Ops, r.o.Budget); err != nil {
		st.Close(ctx)
		return nil, err
	}
	return c, nil
}

func (c *kvcase) close(ctx context.Context) { c.store.Close(ctx) }

func (c *kvcase) get(ctx context.Context, k kv.Key) error {
	_, ok, err := c.ns.Get(ctx, plugin.Chat(k.Chat), k.Name)
	if err == nil && !ok {
		err = fmt.Errorf("key %s missing", k.Name)
	}
	return err
}

func (c *kvcase) set(ctx context.Context, k kv.Key) error {
	r, err := c.ns.Set(ctx, plugin.Chat(k.Chat), k.Name, c.v)
	if err == nil && r != plugin.Updated {
		err = fmt.Errorf("set of loaded key %s reported %v", k.Name, r)
	}
	return err
}

// time runs op on random keys, up to ops times or for budget, and returns
// each call's duration.
func (c *kvcase) time(ctx context.Context, op func(context.Context, kv.Key) error, ops int, budget time.Duration) ([]time.Duration, error) {
	ds := make([]time.Duration, 0, ops)
	deadline := time.Now().Add(budget)
	for len(ds) < ops && time.Now().Before(deadline) {
		k := keyOf(c.rng.IntN(c.n))
		t0 := time.Now()
		if err := op(ctx, k); err != nil {
			return nil, err
		}
		ds = append(ds, time.Since(t0))
	}
	return ds, nil
}

// measure times gets, then sets of existing keys with new values of the
// same size, on a fresh store of n keys.
func (r *runner) measure(ctx context.Context, tg target, n, size int) ([2]stats.Stats, error) {
	var out [2]stats.Stats
	c, err := r.open(ctx, tg, n, size)
	if err != nil {
		return out, err
	}
	defer c.close(ctx)
	for i, op := range []func(context.Context, kv.Key) error{c.get, c.set} {
		ds, err := c.time(ctx, op, r.o.Ops, r.o.Budget)
		if err != nil {
			return out, err
		}
		out[i] = stats.Summarize(ds)
	}
	return out, nil
}

// scale times gets on a store of small keys and one of large keys, in
// alternating rounds so that both see the same machine (other load on a
// shared host drifts over seconds), and returns each one's stats.
func (r *runner) scale(ctx context.Context, tg target, small, large int) (stats.Stats, stats.Stats, error) {
	const rounds = 5
	a, err := r.open(ctx, tg, small, 100)
	if err != nil {
		return stats.Stats{}, stats.Stats{}, err
	}
	defer a.close(ctx)
	b, err := r.open(ctx, tg, large, 100)
	if err != nil {
		return stats.Stats{}, stats.Stats{}, err
	}
	defer b.close(ctx)
	var da, db []time.Duration
	for range rounds {
		for _, x := range []struct {
			c   *kvcase
			out *[]time.Duration
		}{{a, &da}, {b, &db}} {
			ds, err := x.c.time(ctx, x.c.get, r.o.Ops/rounds, r.o.Budget/rounds)
			if err != nil {
				return stats.Stats{}, stats.Stats{}, err
			}
			*x.out = append(*x.out, ds...)
		}
	}
	return stats.Summarize(da), stats.Summarize(db), nil
}

func memoryTarget() target {
	return target{
		name: "map",
		open: func(context.Context, string) (kv.Engine, error) { return newMemory(), nil },
		load: func(ctx context.Context, e kv.Engine, n int, v string) error {
			m := e.(*memory)
			for i := range n {
				k := keyOf(i)
				m.rows[k] = kv.Entry{Key: k, Value: v, Size: kv.Size(k.Name, v)}
			}
			return nil
		},
	}
}

func sqliteTarget(dir string) target {
	return target{
		name: "sqlite",
		open: func(ctx context.Context, tag string) (kv.Engine, error) {
			path := filepath.Join(dir, "kv_"+tag+".db")
			for _, suffix := range []string{"", "-wal", "-shm"} {
				os.Remove(path + suffix)
			}
			return sqlite.Open(ctx, path, db.SQLiteOptions{})
		},
		load: func(ctx context.Context, e kv.Engine, n int, v string) error {
			d := e.(*sqlite.Engine).DB()
			now := time.Now().UnixMilli()
			for start := 0; start < n; start += 10000 {
				tx, err := d.Write.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				stmt, err := tx.PrepareContext(ctx, `INSERT INTO kv (plugin, chat_key, user_key, store_key, value, size, expires_at, updated_at)
					VALUES (?, ?, ?, ?, ?, ?, 0, ?)`)
				if err != nil {
					tx.Rollback()
					return err
				}
				for i := start; i < min(n, start+10000); i++ {
					k := keyOf(i)
					if _, err := stmt.ExecContext(ctx, k.Plugin, k.Chat, k.User, k.Name, []byte(v), kv.Size(k.Name, v), now); err != nil {
						tx.Rollback()
						return err
					}
				}
				stmt.Close()
				if err := tx.Commit(); err != nil {
					return err
				}
			}
			_, err := d.Write.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
			return err
		},
	}
}

// postgresTarget runs each case in a fresh schema of the database at base,
// dropped by cleanup.
func postgresTarget(ctx context.Context, base string) (target, func(), error) {
	b := make([]byte, 4)
	rand.Read(b)
	prefix := "kvbench_" + hex.EncodeToString(b)
	var schemas []string
	exec := func(sql string) error {
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, sql)
		return err
	}
	cleanup := func() {
		for _, s := range schemas {
			exec("DROP SCHEMA " + s + " CASCADE")
		}
	}
	u, err := url.Parse(base)
	if err != nil {
		return target{}, nil, fmt.Errorf("postgres URL does not parse")
	}
	tg := target{
		name: "postgres",
		open: func(ctx context.Context, tag string) (kv.Engine, error) {
			s := prefix + "_" + tag
			if err := exec("CREATE SCHEMA " + s); err != nil {
				return nil, err
			}
			schemas = append(schemas, s)
			q := u.Query()
			q.Set("search_path", s)
			su := *u
			su.RawQuery = q.Encode()
			return postgres.Open(ctx, su.String())
		},
		load: func(ctx context.Context, e kv.Engine, n int, v string) error {
			pool := e.(*postgres.Engine).Pool()
			now := time.Now().UnixMilli()
			i := 0
			_, err := pool.CopyFrom(ctx, pgx.Identifier{"kv"},
				[]string{"plugin", "chat_key", "user_key", "store_key", "value", "size", "expires_at", "updated_at"},
				pgx.CopyFromFunc(func() ([]any, error) {
					if i == n {
						return nil, nil
					}
					k := keyOf(i)
					i++
					return []any{k.Plugin, k.Chat, k.User, k.Name, []byte(v), kv.Size(k.Name, v), int64(0), now}, nil
				}))
			if err != nil {
				return err
			}
			_, err = pool.Exec(ctx, "VACUUM ANALYZE kv")
			return err
		},
	}
	return tg, cleanup, nil
}
