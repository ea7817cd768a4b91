package vector_test

import (
	"context"
	"testing"

	"github.com/nekro-go/nekro/internal/kv/kvtest"
	"github.com/nekro-go/nekro/internal/vector"
	"github.com/nekro-go/nekro/internal/vector/vectortest"
)

func harness(kind string) vectortest.Harness {
	return func(t *testing.T) func() vector.Store {
		openDB := kvtest.DatabaseOpener(t, kind)
		return func() vector.Store {
			s, err := vector.Open(context.Background(), openDB())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	}
}

func TestSQLite(t *testing.T) { vectortest.Run(t, harness("sqlite")) }

func TestPostgres(t *testing.T) { vectortest.Run(t, harness("postgres")) }
