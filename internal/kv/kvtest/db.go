package kvtest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/nekro-go/nekro/internal/db"
)

// DatabaseKinds are the databases the portable stores' tests run on;
// "postgres" needs NEKRO_TEST_DATABASE_URL (see PostgresURL).
var DatabaseKinds = []string{"sqlite", "postgres"}

// DatabaseOpener returns a function opening another handle on one fresh
// database of kind ("sqlite" or "postgres"), as another nekro process
// sharing it would; every handle is closed when the test ends.
func DatabaseOpener(t testing.TB, kind string) func() db.Handle {
	t.Helper()
	ctx := context.Background()
	switch kind {
	case "sqlite":
		path := filepath.Join(t.TempDir(), "nekro.db")
		return func() db.Handle {
			d, err := db.OpenSQLite(ctx, path, db.SQLiteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			return db.Handle{SQLite: d}
		}
	case "postgres":
		u := FreshSchema(t, PostgresURL(t))
		return func() db.Handle {
			pool, err := db.OpenPostgres(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			return db.Handle{Postgres: pool}
		}
	}
	t.Fatalf("no database kind %q", kind)
	return nil
}
