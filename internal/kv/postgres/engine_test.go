package postgres_test

import (
	"context"
	"testing"

	"github.com/nekro-go/nekro/internal/kv"
	"github.com/nekro-go/nekro/internal/kv/kvtest"
	"github.com/nekro-go/nekro/internal/kv/postgres"
)

func TestConformance(t *testing.T) {
	base := kvtest.PostgresURL(t)
	open := func(t *testing.T, u string) kv.Engine {
		e, err := postgres.Open(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	urls := map[kv.Engine]string{}
	kvtest.Run(t, kvtest.Harness{
		Open: func(t *testing.T) kv.Engine {
			u := kvtest.FreshSchema(t, base)
			e := open(t, u)
			urls[e] = u
			return e
		},
		Reopen: func(t *testing.T, e kv.Engine) kv.Engine {
			u := urls[e]
			if err := e.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			return open(t, u)
		},
	})
}
