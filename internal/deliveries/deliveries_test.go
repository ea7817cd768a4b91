package deliveries

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/kv/kvtest"
)

// eachDatabase runs f against two stores on one fresh database (two
// nekro processes sharing it), SQLite always and PostgreSQL when
// NEKRO_TEST_DATABASE_URL is set.
func eachDatabase(t *testing.T, f func(t *testing.T, a, b *Store)) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			open := kvtest.DatabaseOpener(t, kind)
			var st [2]*Store
			for i := range st {
				s, err := Open(context.Background(), open())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				st[i] = s
			}
			f(t, st[0], st[1])
		})
	}
}

func claim(t *testing.T, s *Store, endpoint string, keys ...string) bool {
	t.Helper()
	ok, err := s.Claim(context.Background(), endpoint, keys...)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// A delivery is new once, in whichever process; any one of its keys seen
// before makes it a duplicate; endpoints are apart; a released delivery
// is new again; a keyless one always is.
func TestClaimOnce(t *testing.T) {
	eachDatabase(t, func(t *testing.T, a, b *Store) {
		var wg sync.WaitGroup
		wins := make(chan bool, 8)
		for i := range 8 {
			s := a
			if i%2 == 1 {
				s = b
			}
			wg.Go(func() { wins <- claim(t, s, "github", "id:1", "sha256:aa") })
		}
		wg.Wait()
		close(wins)
		n := 0
		for w := range wins {
			if w {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("8 claims of one delivery at once: %d new, want 1", n)
		}
		if claim(t, b, "github", "id:other", "sha256:aa") {
			t.Error("the same body under another id was new")
		}
		if claim(t, a, "github", "id:1", "sha256:bb") {
			t.Error("the same id with another body was new")
		}
		if !claim(t, a, "github", "id:2", "sha256:bb") {
			t.Error("a new delivery (id 2, body bb) was a duplicate: the refused claims above left keys behind")
		}
		if !claim(t, a, "other", "id:1", "sha256:aa") {
			t.Error("another endpoint's delivery was a duplicate")
		}
		if err := a.Release(context.Background(), "github", "id:2", "sha256:bb"); err != nil {
			t.Fatal(err)
		}
		if !claim(t, b, "github", "id:2", "sha256:bb") {
			t.Error("a released delivery stayed claimed")
		}
		if !claim(t, a, "github") || !claim(t, a, "github", "") || !claim(t, a, "github") {
			t.Error("a delivery without keys was a duplicate")
		}
	})
}

// Keys are kept for Window and at most maxKeys of them, oldest forgotten
// first.
func TestWindowAndBound(t *testing.T) {
	eachDatabase(t, func(t *testing.T, a, _ *Store) {
		start := time.Now()
		a.now = func() time.Time { return start }
		claim(t, a, "e", "id:old")
		a.now = func() time.Time { return start.Add(Window - time.Minute) }
		if claim(t, a, "e", "id:old") {
			t.Error("a delivery within the window was new")
		}
		a.now = func() time.Time { return start.Add(Window + time.Minute) }
		if !claim(t, a, "e", "id:old") {
			t.Error("a delivery past the window was still a duplicate")
		}

		a.maxKeys = 5
		base := start.Add(2 * Window)
		for i := range 8 {
			a.now = func() time.Time { return base.Add(time.Duration(i) * time.Second) }
			claim(t, a, "e", fmt.Sprint("id:n", i))
		}
		var count int
		if err := a.w.QueryRow(`SELECT COUNT(*) FROM webhook_deliveries`).Scan(&count); err != nil {
			t.Fatal(err)
		}
		if count != 5 {
			t.Errorf("%d keys kept, want 5", count)
		}
		if claim(t, a, "e", "id:n7") || !claim(t, a, "e", "id:n0") {
			t.Error("the bound forgot other keys than the oldest")
		}
	})
}
