package uids_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/nekro-go/nekro/internal/kv/kvtest"
	"github.com/nekro-go/nekro/internal/uids"
)

// Many new chats starting at once on several replicas (two allocators on
// one database, as two nekro processes have) each get a uid of their own,
// and none fails for it; a chat asked for on both replicas gets one uid.
func TestConcurrentNewChatsOnReplicas(t *testing.T) {
	for _, kind := range kvtest.DatabaseKinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			open := kvtest.DatabaseOpener(t, kind)
			rng := uids.Range{First: 2_000_000, Last: 2_000_999}
			var replicas []*uids.Allocator
			for range 2 {
				a, err := uids.Open(ctx, open(), rng)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { a.Close() })
				replicas = append(replicas, a)
			}
			const chats = 60
			got := make([][2]int, chats)
			var wg sync.WaitGroup
			errs := make(chan error, 2*chats)
			for i := range chats {
				for r, a := range replicas {
					wg.Go(func() {
						uid, err := a.UID(ctx, fmt.Sprintf("chat-%d", i))
						if err != nil {
							errs <- err
							return
						}
						got[i][r] = uid
					})
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if t.Failed() {
				return
			}
			seen := map[int]int{}
			for i, g := range got {
				if g[0] != g[1] {
					t.Errorf("chat-%d has uid %d on one replica and %d on the other", i, g[0], g[1])
				}
				if g[0] < rng.First || g[0] > rng.Last {
					t.Errorf("chat-%d has uid %d outside %s", i, g[0], rng)
				}
				if j, dup := seen[g[0]]; dup {
					t.Errorf("chat-%d and chat-%d share uid %d", i, j, g[0])
				}
				seen[g[0]] = i
			}
		})
	}
}

// A full range is reported with what to do, not retried forever.
func TestExhaustedRangeSaysWhatToDo(t *testing.T) {
	ctx := context.Background()
	a, err := uids.Open(ctx, kvtest.DatabaseOpener(t, "sqlite")(), uids.Range{First: 3_000_000, Last: 3_000_001})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, c := range []string{"a", "b"} {
		if _, err := a.UID(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	_, err = a.UID(ctx, "c")
	if err == nil || !strings.Contains(err.Error(), "--sandbox-uids") {
		t.Fatalf("third chat in a two-uid range: %v, want an error naming --sandbox-uids", err)
	}
}

// The allocator remembers a bounded number of chats; a chat it forgot
// keeps the uid the database recorded for it.
func TestForgottenChatsKeepTheirUID(t *testing.T) {
	ctx := context.Background()
	a, err := uids.Open(ctx, kvtest.DatabaseOpener(t, "sqlite")(), uids.Range{First: 3_000_000, Last: 3_000_099})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	a.SetCacheMax(4)
	first := map[string]int{}
	for i := range 12 {
		k := fmt.Sprintf("chat-%d", i)
		if first[k], err = a.UID(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if n := a.Cached(); n > 4 {
		t.Fatalf("%d uids held in memory, want at most 4", n)
	}
	for k, want := range first {
		if got, err := a.UID(ctx, k); err != nil || got != want {
			t.Fatalf("%s: uid %d (%v), first given %d", k, got, err, want)
		}
	}
}
