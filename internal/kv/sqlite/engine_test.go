package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/kv"
	"github.com/nekro-go/nekro/internal/kv/kvtest"
	"github.com/nekro-go/nekro/internal/kv/sqlite"
)

func TestConformance(t *testing.T) {
	open := func(t *testing.T, path string) kv.Engine {
		e, err := sqlite.Open(context.Background(), path, db.SQLiteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	kvtest.Run(t, kvtest.Harness{
		Open: func(t *testing.T) kv.Engine { return open(t, filepath.Join(t.TempDir(), "nekro.db")) },
		Reopen: func(t *testing.T, e kv.Engine) kv.Engine {
			path := e.(*sqlite.Engine).DB().Path
			if err := e.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			return open(t, path)
		},
	})
}
