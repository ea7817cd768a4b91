package pluginstate_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/kv/kvtest"
	"github.com/nekro-go/nekro/internal/pluginstate"
)

// The operator's choices on both databases: a plugin without a row is on,
// a choice replaces the previous one, and a second store on the same
// database (another nekro process) reads it.
func TestChoicesAreSharedThroughTheDatabase(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			var open func() db.Handle
			switch kind {
			case "sqlite":
				path := filepath.Join(t.TempDir(), "nekro.db")
				open = func() db.Handle {
					d, err := db.OpenSQLite(ctx, path, db.SQLiteOptions{})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { d.Close() })
					return db.Handle{SQLite: d}
				}
			case "postgres":
				u := kvtest.FreshSchema(t, kvtest.PostgresURL(t))
				open = func() db.Handle {
					pool, err := db.OpenPostgres(ctx, u)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(pool.Close)
					return db.Handle{Postgres: pool}
				}
			}
			a, err := pluginstate.Open(ctx, open())
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b, err := pluginstate.Open(ctx, open())
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if off, err := b.Disabled(ctx); err != nil || len(off) != 0 {
				t.Fatalf("fresh: %v %v", off, err)
			}
			for _, step := range []struct {
				key string
				on  bool
			}{{"a.x", false}, {"a.y", false}, {"a.x", true}} {
				if err := a.Set(ctx, step.key, step.on); err != nil {
					t.Fatal(err)
				}
			}
			off, err := b.Disabled(ctx)
			if err != nil || len(off) != 1 || !off["a.y"] {
				t.Errorf("disabled = %v, %v; want only a.y", off, err)
			}
		})
	}
}
