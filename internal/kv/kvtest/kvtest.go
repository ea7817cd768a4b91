// Package kvtest is the conformance suite every KV engine must pass. An
// engine's tests call Run with a function that opens a fresh, empty engine
// on real storage; the suite drives it through the kv.Store front, the way
// plugins use it, so it checks user-visible behaviour: scope isolation,
// the reference's result codes, limits, quotas, expiry, listing, atomic
// updates under concurrency.
package kvtest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/kv"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/plugin"
)

// Harness opens engines for the suite.
type Harness struct {
	// Open returns a fresh, empty engine. The suite closes it.
	Open func(t *testing.T) kv.Engine
	// Reopen, if set, closes e and opens the same storage again.
	Reopen func(t *testing.T, e kv.Engine) kv.Engine
}

// clock is a settable time source.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

type env struct {
	t     *testing.T
	store *kv.Store
	clock *clock
	ctx   context.Context
}

func (h Harness) env(t *testing.T, lim kv.Limits) *env {
	t.Helper()
	return h.envOpts(t, kv.Options{Limits: lim})
}

// envOpts is env with more options; the suite sets the clock.
func (h Harness) envOpts(t *testing.T, opts kv.Options) *env {
	t.Helper()
	c := newClock()
	opts.Now = c.now
	s := kv.New(h.Open(t), opts)
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return &env{t: t, store: s, clock: c, ctx: context.Background()}
}

// Run runs the whole suite.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"ScopesAreIsolated", testScopes},
		{"PluginsAreIsolated", testPlugins},
		{"ResultCodes", testResultCodes},
		{"ValuesRoundTrip", testValues},
		{"MissingUserIsAnError", testNoUser},
		{"KeyLimits", testKeyLimits},
		{"ValueCap", testValueCap},
		{"Quota", testQuota},
		{"Expiry", testExpiry},
		{"Update", testUpdate},
		{"StoreCallInsideUpdateFails", testNestedCall},
		{"SlowUpdateFuncTimesOut", testSlowUpdateFunc},
		{"UpdateFuncPanic", testUpdatePanic},
		{"ConcurrentUpdatesLoseNothing", testConcurrentUpdates},
		{"ConcurrentFirstSetCreatesOnce", testConcurrentCreate},
		{"Keys", testKeys},
		{"DeleteScope", testDeleteScope},
		{"EraseUserInEveryPlugin", testEraseUser},
		{"Persistence", testPersistence},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if v := recover(); v != nil {
					f, ok := v.(failure)
					if !ok {
						panic(v)
					}
					t.Fatalf("unexpected error: %v", f.err)
				}
			}()
			tc.fn(t, h)
		})
	}
}

// failure carries an unexpected error out of a test through must.
type failure struct{ err error }

// must returns v, or stops the test when err is not nil. It panics with a
// failure that Run turns into t.Fatal; use it only on the test goroutine.
func must[T any](v T, err error) T {
	if err != nil {
		panic(failure{err})
	}
	return v
}

func (e *env) get(ns plugin.Store, s plugin.Scope, k string) (string, bool) {
	e.t.Helper()
	v, ok, err := ns.Get(e.ctx, s, k)
	if err != nil {
		e.t.Fatalf("get %s %q: %v", s, k, err)
	}
	return v, ok
}

func (e *env) want(ns plugin.Store, s plugin.Scope, k, want string) {
	e.t.Helper()
	v, ok := e.get(ns, s, k)
	if !ok || v != want {
		e.t.Fatalf("get %s %q = %q, %v; want %q", s, k, v, ok, want)
	}
}

func (e *env) absent(ns plugin.Store, s plugin.Scope, k string) {
	e.t.Helper()
	if v, ok := e.get(ns, s, k); ok {
		e.t.Fatalf("get %s %q = %q; want no value", s, k, v)
	}
}

func testScopes(t *testing.T, h Harness) {
	e := h.env(t, kv.Limits{})
	ns := e.store.For("alice.prefs")
	scopes := map[string]plugin.Scope{
		"global":  plugin.Global(),
		"chatA":   plugin.Chat("group_A"),
		"chatB":   plugin.Chat("group_B"),
		"userU":   plugin.User("U"),
		"userV":   plugin.User("V"),
		"chatAU":  plugin.ChatUser("group_A", "U"),
		"chatBU":  plugin.ChatUser("group_B", "U"),
		"chatAV":  plugin.ChatUser("group_A", "V"),
		"literal": {ChatKey: "group_C"},
	}
	for name, s := range scopes {
		if r := must(ns.Set(e.ctx, s, "theme", "theme of "+name)); r != plugin.Created {
			t.Fatalf("first set in %s = %v, want created", name, r)
		}
	}
	for name, s := range scopes {
		e.want(ns, s, "theme", "theme of "+name)
	}
	// A user's value is one value across chats: the user scope has no chat.
	e.want(ns, plugin.User("U"), "theme", "theme of userU")
	e.absent(ns, plugin.User("W"), "theme")
	e.absent(ns, plugin.Chat("group_D"), "theme")
	// A literal Scope{ChatKey} is the chat scope.
	e.want(ns, plugin.Chat("group_C"), "theme", "theme of literal")
	// Deleting in one scope leaves the others.
	if r := must(ns.Delete(e.ctx, plugin.Chat("group_A"), "theme")); r != plugin.Deleted {
		t.Fatalf("delete = %v", r)
	}
	e.absent(ns, plugin.Chat("group_A"), "theme")
	e.want(ns, plugin.Chat("group_B"), "theme", "theme of chatB")
	e.want(ns, plugin.ChatUser("group_A", "U"), "theme", "theme of chatAU")
	e.want(ns, plugin.Global(), "theme", "theme of global")
}

func testPlugins(t *testing.T, h Harness) {
	e := h.env(t, kv.Limits{})
	a, b := e.store.For("alice.one"), e.store.For("bob.one")
	must(a.Set(e.ctx, plugin.Global(), "k", "a"))
	e.absent(b, plugin.Global(), "k")
	must(b.Set(e.ctx, plugin.Global(), "k", "b"))
	e.want(a, plugin.Global(), "k", "a")
	e.want(b, plugin.Global(), "k", "b")
	must(a.DeleteScope(e.ctx, plugin.Chat("c")))
	must(b.Set(e.ctx, plugin.Chat("c"), "k", "b"))
	if n := must(a.DeleteScope(e.ctx, plugin.Chat("c"))); n != 0 {
		t.Fatalf("plugin a deleted %d of plugin b's values", n)
	}
	e.want(b, plugin.Chat("c"), "k", "b")
}

func testResultCodes(t *testing.T, h Harness) {
	e := h.env(t, kv.Limits{})
	ns := e.store.For("alice.codes")
	s := plugin.Chat("c")
	// Seed 001 and the reference: set 0 = created, 1 = updated;
	// delete 0 = deleted, 1 = nothing there.
	if r := must(ns.Set(e.ctx, s, "k", "1")); r != plugin.Created || int(r) != 0 {
		t.Fatalf("first set = %d", r)
	}
	if r := must(ns.Set(e.ctx, s, "k", "2")); r != plugin.Updated || int(r) != 1 {
		t.Fatalf("second set = %d", r)
	}
	if r := must(ns.Set(e.ctx, s, "k", "2")); r != plugin.Updated {
		t.Fatalf("same-value set = %d", r)
	}
	if r := must(ns.Delete(e.ctx, s, "k")); r != plugin.Deleted || int(r) != 0 {
		t.Fatalf("delete = %d", r)
	}
	if r := must(ns.Delete(e.ctx, s, "k")); r != plugin.NotFound || int(r) != 1 {
		t.Fatalf("second delete = %d", r)
	}
	if r := must(ns.Set(e.ctx, s, "k", "3")); r != plugin.Created {
		t.Fatalf("set after delete = %d", r)
	}
}

func testValues(t *testing.T, h Harness) {
	e := h.env(t, kv.Limits{})
	ns := e.store.For("alice.values")
	values := []string{
		"", " ", "plain", "多字节 UTF-8 ✓ 🎉", "with\x00nul\x00bytes", "\xff\xfe not UTF-8",
		`{"theme": "dark", "notifications": true}`, strings.Repeat("x", 100_000),
	}
	for i, v := range values {
		k := "v" + strconv.Itoa(i)
		must(ns.Set(e.ctx, plugin.Global(), k, v))
		e.want(ns, plugin.Global(), k, v)
	}
	// Keys may be any printable UTF-8.
	for _, k := range []string{"user_prefs:theme", "cache:api:last_fetch", "ключ", "键 with spaces", "a/b/../c"} {
		must(ns.Set(e.ctx, plugin.Global(), k, k))
		e.want(ns, plugin.Global(), k, k)
	}
}

func testNoUser(t *testing.T, h Harness) {
	e := h.env(t, kv.Limits{})
	ns := e.store.For("alice.nouser")
	ctx := pluginhost.NewCtx(e.ctx, nil, &pluginhost.RunEnv{RunInfo: plugin.RunInfo{ChatKey: "group_A"}})
	for _, s := range []plugin.Scope{ctx.UserScope(), ctx.ChatUserScope(), plugin.User(""), plugin.ChatUser("c", "")} {
		_, err := ns.Set(e.ctx, s, "k", "v")
		if !errors.Is(err, plugin.ErrNoUser) {
			t.Fatalf("set in %s without a user: err = %v, want ErrNoUser", s, err)
		}
		if _, _, err := ns.Get(e.ctx, s, "k"); !errors.Is(err, plugin.ErrNoUser) {
			t.Fatalf("get in %s without a user: err = %v, want ErrNoUser", s, err)
		}
		if _, err := ns.Keys(e.ctx, s, plugin.KeysQuery{}); !errors.Is(err, plugin.ErrNoUser) {
			t.Fatalf("keys in %s without a user: err = %v, want ErrNoUser", s, err)
		}
	}
	if _, err := ns.Set(e.ctx, plugin.Chat(""), "k", "v"); !errors.Is(err, plugin.ErrNoChat) {
		t.Fatalf("set in a chat scope without a chat: err = %v", err)
	}
	// Nothing leaked into the global or chat scopes.
	e.absent(ns, plugin.Global(), "k")
	e.absent(ns, plugin.Chat("group_A"), "k")
	// With a user, the same helpers work.
	ctx = pluginhost.NewCtx(e.ctx, nil, &pluginhost.RunEnv{RunInfo: plugin.RunInfo{ChatKey: "group_A", UserID: "U"}})
	must(ns.Set(e.ctx, ctx.UserScope(), "k", "v"))
	e.want(ns, plugin.User("U"), "k", "v")
}

// wantLimit checks that err is a limit refusal naming the size and limit.
func wantLimit(t *testing.T, err error, what string, size, limit int) {
	t.Helper()
	if !errors.Is(err, plugin.ErrLimit) {
		t.Fatalf("err = %v, want a limit error", err)
	}
	msg := err.Error()
	for _, s := range []string{what, strconv.Itoa(size), strconv.Itoa(limit)} {
		if !strings.Contains(msg, s) {
			t.Fatalf("error %q does not name %q", msg, s)
		}
	}
}

func testKeyLimits(t *testing.T, h Harness) {
	e := h.env(t, kv.Limits{})
	ns := e.store.For("alice.limits")
	ok := func(s plugin.Scope, k string) {
		t.Helper()
		must(ns.Set(e.ctx, s, k, "v"))
		e.want(ns, s, k, "v")
	}
	ok(plugin.Global(), strings.Repeat("k", 128))
	_, err := ns.Set(e.ctx, plugin.Global(), strings.Repeat("k", 129), "v")
	wantLimit(t, err, "store key", 129, 128)
	_, _, err = ns.Get(e.ctx, plugin.Global(), strings.Repeat("é", 65)) // 130 bytes
	wantLimit(t, err, "store key", 130, 128)

	ok(plugin.Chat(strings.Repeat("c", 256)), "k")
	_, err = ns.Set(e.ctx, plugin.Chat(strings.Repeat("c", 257)), "k", "v")
	wantLimit(t, err, "chat key", 257, 256)
	ok(plugin.User(strings.Repeat("u", 256)), "k")
	_, err = ns.Set(e.ctx, plugin.ChatUser("c", strings.Repeat("u", 300)), "k", "v")
	wantLimit(t, err, "user key", 300, 256)

	for _, bad := range []string{"", "a\nb", "nul\x00", "\xff"} {
		if _, err := ns.Set(e.ctx, plugin.Global(), bad, "v"); err == nil {
			t.Fatalf("set with key %q succeeded", bad)
		}
	}
}

func testValueCap(t *testing.T, h Harness) {
	t.Run("default 1 MiB", func(t *testing.T) {
		e := h.env(t, kv.Limits{})
		ns := e.store.For("alice.cap")
		must(ns.Set(e.ctx, plugin.Global(), "big", strings.Repeat("v", 1<<20)))
		_, err := ns.Set(e.ctx, plugin.Global(), "big", strings.Repeat("w", 1<<20+1))
		wantLimit(t, err, "value", 1<<20+1, 1<<20)
		e.want(ns, plugin.Global(), "big", strings.Repeat("v", 1<<20)) // unchanged
	})
	t.Run("configured", func(t *testing.T) {
		e := h.env(t, kv.Limits{MaxValueBytes: 100})
		ns := e.store.For("alice.cap")
		must(ns.Set(e.ctx, plugin.Global(), "k", strings.Repeat("v", 100)))
		_, err := ns.Set(e.ctx, plugin.Global(), "k2", strings.Repeat("v", 101))
		wantLimit(t, err, "value", 101, 100)
		e.absent(ns, plugin.Global(), "k2")
		_, err = ns.Update(e.ctx, plugin.Global(), "k", func(cur string, _ bool) (string, error) { return cur + "x", nil })
		wantLimit(t, err, "value", 101, 100)
		e.want(ns, plugin.Global(), "k", strings.Repeat("v", 100))
	})
}

func testQuota(t *testing.T, h Harness) {
	e := h.env(t, kv.Limits{QuotaBytes: 1000})
	ns := e.store.For("alice.quota")
	other := e.store.For("bob.quota")
	usage := func(p string) kv.Usage { return must(e.store.Usage(e.ctx, p)) }

	// Nine keys of 2+98 bytes: 900 bytes.
	for i := range 9 {
		must(ns.Set(e.ctx, plugin.Chat("c"), fmt.Sprintf("k%d", i), strings.Repeat("v", 98)))
	}
	if u := usage("alice.quota"); u.Bytes != 900 || u.Keys != 9 {
		t.Fatalf("usage = %+v, want 900 bytes in 9 keys", u)
	}
	// The tenth would bring 1001 bytes: refused before the write.
	_, err := ns.Set(e.ctx, plugin.User("u"), "k9", strings.Repeat("v", 99))
	wantLimit(t, err, "quota of plugin alice.quota", 1001, 1000)
	e.absent(ns, plugin.User("u"), "k9")
	if u := usage("alice.quota"); u.Bytes != 900 {
		t.Fatalf("usage after refusal = %+v", u)
	}
	// Exactly up to the quota is fine; replacing a value counts the difference.
	must(ns.Set(e.ctx, plugin.User("u"), "k9", strings.Repeat("v", 98)))
	must(ns.Set(e.ctx, plugin.Chat("c"), "k0", "small"))
	if u := usage("alice.quota"); u.Bytes != 1000-98+5 || u.Keys != 10 {
		t.Fatalf("usage = %+v", u)
	}
	_, err = ns.Update(e.ctx, plugin.Chat("c"), "k0", func(string, bool) (string, error) { return strings.Repeat("x", 200), nil })
	wantLimit(t, err, "quota", 907-7+202, 1000)
	// Shrinking is always allowed, even over the quota.
	must(ns.Set(e.ctx, plugin.Chat("c"), "k1", "s"))
	// Deleting frees space; other plugins have their own quota.
	must(ns.Delete(e.ctx, plugin.Chat("c"), "k2"))
	n := must(ns.DeleteScope(e.ctx, plugin.User("u")))
	if n != 1 {
		t.Fatalf("delete scope = %d", n)
	}
	if u := usage("alice.quota"); u.Bytes != 7+3+6*100 || u.Keys != 8 {
		t.Fatalf("usage after deletes = %+v", u)
	}
	must(other.Set(e.ctx, plugin.Global(), "k", strings.Repeat("v", 998)))
	if u := usage("bob.quota"); u.Bytes != 999 || u.Keys != 1 {
		t.Fatalf("bob's usage = %+v", u)
	}
}

func testExpiry(t *testing.T, h Harness) {
	e := h.env(t, kv.Limits{})
	ns := e.store.For("alice.ttl")
	s := plugin.Chat("c")
	must(ns.Set(e.ctx, s, "short", "v", plugin.WithTTL(time.Minute)))
	must(ns.Set(e.ctx, s, "at", "v", plugin.WithExpiry(e.clock.now().Add(2*time.Minute))))
	must(ns.Set(e.ctx, s, "forever", "v"))
	if _, err := ns.Set(e.ctx, s, "bad", "v", plugin.WithTTL(0)); err == nil {
		t.Fatal("a zero TTL was accepted")
	}
	e.clock.advance(59 * time.Second)
	e.want(ns, s, "short", "v")
	e.clock.advance(time.Second)
	e.absent(ns, s, "short") // expired at exactly its TTL
	e.want(ns, s, "at", "v")
	keys := must(ns.Keys(e.ctx, s, plugin.KeysQuery{}))
	if strings.Join(keys.Keys, ",") != "at,forever" {
		t.Fatalf("keys = %q", keys.Keys)
	}
	if r := must(ns.Delete(e.ctx, s, "short")); r != plugin.NotFound {
		t.Fatalf("delete of an expired value = %v, want not found", r)
	}
	// An expired value is replaced as if new, and Set without a TTL clears it.
	must(ns.Set(e.ctx, s, "t2", "v", plugin.WithTTL(time.Second)))
	e.clock.advance(2 * time.Second)
	if r := must(ns.Set(e.ctx, s, "t2", "w")); r != plugin.Created {
		t.Fatalf("set over an expired value = %v, want created", r)
	}
	e.clock.advance(time.Hour)
	e.want(ns, s, "t2", "w")
	e.want(ns, s, "forever", "v")
	e.absent(ns, s, "at")

	// Update keeps the expiry unless told otherwise; an expired value
	// reaches fn as absent.
	must(ns.Set(e.ctx, s, "n", "1", plugin.WithTTL(time.Minute)))
	must(ns.Update(e.ctx, s, "n", func(cur string, _ bool) (string, error) { return cur + "1", nil }))
	e.clock.advance(time.Minute)
	e.absent(ns, s, "n")
	got := must(ns.Update(e.ctx, s, "n", func(cur string, found bool) (string, error) {
		if found {
			return "", errors.New("expired value seen")
		}
		return "fresh", nil
	}, plugin.WithTTL(time.Hour)))
	if got != "fresh" {
		t.Fatalf("update = %q", got)
	}
	must(ns.Update(e.ctx, s, "n", func(string, bool) (string, error) { return "forever", nil }, plugin.WithExpiry(time.Time{})))
	e.clock.advance(2 * time.Hour)
	e.want(ns, s, "n", "forever")

	// The sweep reclaims expired rows and their quota.
	if n := must(e.store.Sweep(e.ctx)); n != 1 {
		t.Fatalf("sweep deleted %d rows, want 1 (the value \"at\")", n)
	}
	must(ns.Set(e.ctx, s, "gone", strings.Repeat("x", 1000), plugin.WithTTL(time.Second)))
	before := must(e.store.Usage(e.ctx, "alice.ttl"))
	e.clock.advance(time.Second)
	if n := must(e.store.Sweep(e.ctx)); n != 1 {
		t.Fatalf("sweep deleted %d rows, want 1", n)
	}
	after := must(e.store.Usage(e.ctx, "alice.ttl"))
	if before.Bytes-after.Bytes != 1004 || before.Keys-after.Keys != 1 {
		t.Fatalf("usage before sweep %+v, after %+v", before, after)
	}
	e.want(ns, s, "forever", "v")
}

func testUpdate(t *testing.T, h Harness) {
	e := h.env(t, kv.Limits{})
	ns := e.store.For("alice.update")
	s := plugin.User("u")
	got := must(ns.Update(e.ctx, s, "n", func(cur string, found bool) (string, error) {
		if found || cur != "" {
			t.Fatalf("fn got %q, %v for a missing key", cur, found)
		}
		return "1", nil
	}))
	if got != "1" {
		t.Fatalf("update = %q", got)
	}
	e.want(ns, s, "n", "1")
	boom := errors.New("boom")
	_, err := ns.Update(e.ctx, s, "n", func(string, bool) (string, error) { return "2", boom })
	if !errors.Is(err, boom) {
		t.Fatalf("update err = %v, want the function's own error", err)
	}
	e.want(ns, s, "n", "1")
	if _, err := ns.Update(e.ctx, s, "n", nil); err == nil {
		t.Fatal("a nil update function was accepted")
	}
}

func testConcurrentUpdates(t *testing.T, h Harness) {
	e := h.env(t, kv.Limits{})
	ns := e.store.For("alice.counter")
	const workers, each = 8, 1000
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for range each {
				_, err := ns.Update(e.ctx, plugin.Global(), "count", func(cur string, found bool) (string, error) {
					n := 0
					if found {
						var err error
						if n, err = strconv.Atoi(cur); err != nil {
							return "", err
						}
					}
					return strconv.Itoa(n + 1), nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	e.want(ns, plugin.Global(), "count", strconv.Itoa(workers*each))
}

func testConcurrentCreate(t *testing.T, h Harness) {
	e := h.env(t, kv.Limits{})
	ns := e.store.For("alice.race")
	var created atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			r, err := ns.Set(e.ctx, plugin.Chat("c"), "k", strconv.Itoa(i))
			if err != nil {
				t.Error(err)
			}
			if r == plugin.Created {
				created.Add(1)
			}
		})
	}
	wg.Wait()
	if n := created.Load(); n != 1 {
		t.Fatalf("%d concurrent first sets reported created, want 1", n)
	}
	if u := must(e.store.Usage(e.ctx, "alice.race")); u.Keys != 1 {
		t.Fatalf("usage = %+v, want one key (no duplicate rows)", u)
	}
}

func testKeys(t *testing.T, h Harness) {
	e := h.env(t, kv.Limits{})
	ns := e.store.For("alice.keys")
	s := plugin.Chat("c")
	names := []string{"note:1", "note:2", "note:10", "note:é", "note:z", "notes", "other", "Note:upper", "note:\U0010FFFF", "note:\uffff"}
	for _, k := range names {
		must(ns.Set(e.ctx, s, k, "v"))
	}
	must(ns.Set(e.ctx, plugin.Global(), "note:global", "v"))
	must(ns.Set(e.ctx, plugin.ChatUser("c", "u"), "note:chatuser", "v"))
	must(e.store.For("bob.keys").Set(e.ctx, s, "note:bob", "v"))

	all := func(q plugin.KeysQuery) []string {
		var out []string
		for {
			p := must(ns.Keys(e.ctx, s, q))
			if q.Limit > 0 && len(p.Keys) > q.Limit {
				t.Fatalf("page of %d keys over limit %d", len(p.Keys), q.Limit)
			}
			out = append(out, p.Keys...)
			if p.Next == "" {
				return out
			}
			q.Cursor = p.Next
		}
	}
	want := "note:1,note:10,note:2,note:z,note:é,note:\uffff,note:\U0010FFFF" // byte order
	for _, limit := range []int{0, 1, 2, 3, 7, 1000} {
		got := strings.Join(all(plugin.KeysQuery{Prefix: "note:", Limit: limit}), ",")
		if got != want {
			t.Fatalf("keys with limit %d = %q, want %q", limit, got, want)
		}
	}
	if got := strings.Join(all(plugin.KeysQuery{Prefix: "note:1"}), ","); got != "note:1,note:10" {
		t.Fatalf("prefix note:1 = %q", got)
	}
	if got := all(plugin.KeysQuery{}); len(got) != len(names) {
		t.Fatalf("all keys = %q", got)
	}
	if got := all(plugin.KeysQuery{Prefix: "nothing"}); len(got) != 0 {
		t.Fatalf("keys of an unused prefix = %q", got)
	}
	p := must(ns.Keys(e.ctx, s, plugin.KeysQuery{Prefix: "note:", Limit: 7}))
	if len(p.Keys) != 7 || p.Next != "" {
		t.Fatalf("an exact last page = %d keys, next %q", len(p.Keys), p.Next)
	}
	// Expired keys are skipped without shortening pages.
	for i := range 5 {
		must(ns.Set(e.ctx, s, fmt.Sprintf("note:0%d", i), "v", plugin.WithTTL(time.Second)))
	}
	e.clock.advance(time.Second)
	p = must(ns.Keys(e.ctx, s, plugin.KeysQuery{Prefix: "note:", Limit: 2}))
	if strings.Join(p.Keys, ",") != "note:1,note:10" || p.Next != "note:10" {
		t.Fatalf("page after expiry = %q next %q", p.Keys, p.Next)
	}
}

func testDeleteScope(t *testing.T, h Harness) {
	e := h.env(t, kv.Limits{})
	ns := e.store.For("alice.erase")
	fill := func() {
		for _, s := range []plugin.Scope{plugin.Global(), plugin.Chat("A"), plugin.Chat("B"), plugin.User("U"), plugin.User("V"),
			plugin.ChatUser("A", "U"), plugin.ChatUser("B", "U"), plugin.ChatUser("A", "V")} {
			for _, k := range []string{"k1", "k2"} {
				must(ns.Set(e.ctx, s, k, s.String()))
			}
		}
	}
	fill()
	if n := must(ns.DeleteScope(e.ctx, plugin.Chat("A"))); n != 6 {
		t.Fatalf("reset of chat A deleted %d values, want 6 (A, A+U, A+V)", n)
	}
	e.absent(ns, plugin.Chat("A"), "k1")
	e.absent(ns, plugin.ChatUser("A", "U"), "k1")
	e.absent(ns, plugin.ChatUser("A", "V"), "k2")
	e.want(ns, plugin.Chat("B"), "k1", `chat "B"`)
	e.want(ns, plugin.ChatUser("B", "U"), "k1", `chat "B" user "U"`)
	e.want(ns, plugin.User("U"), "k1", `user "U"`)
	e.want(ns, plugin.Global(), "k1", "global")

	fill()
	if n := must(ns.DeleteScope(e.ctx, plugin.User("U"))); n != 6 {
		t.Fatalf("erasing user U deleted %d values, want 6 (U, A+U, B+U)", n)
	}
	e.absent(ns, plugin.User("U"), "k1")
	e.absent(ns, plugin.ChatUser("B", "U"), "k1")
	e.want(ns, plugin.User("V"), "k1", `user "V"`)
	e.want(ns, plugin.ChatUser("A", "V"), "k1", `chat "A" user "V"`)

	if n := must(ns.DeleteScope(e.ctx, plugin.ChatUser("A", "V"))); n != 2 {
		t.Fatalf("deleting chat A user V = %d, want 2", n)
	}
	e.want(ns, plugin.Chat("A"), "k1", `chat "A"`)
	if _, err := ns.DeleteScope(e.ctx, plugin.Global()); err == nil {
		t.Fatal("DeleteScope of the global scope was accepted")
	}
	if _, err := ns.DeleteScope(e.ctx, plugin.User("")); !errors.Is(err, plugin.ErrNoUser) {
		t.Fatalf("DeleteScope without a user: %v", err)
	}
	e.want(ns, plugin.Global(), "k1", "global")
	if n := must(e.store.DeletePlugin(e.ctx, "alice.erase")); n == 0 {
		t.Fatal("DeletePlugin deleted nothing")
	}
	if u := must(e.store.Usage(e.ctx, "alice.erase")); u.Keys != 0 || u.Bytes != 0 {
		t.Fatalf("usage after DeletePlugin = %+v", u)
	}
}

func testPersistence(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("the harness cannot reopen its storage")
	}
	eng := h.Open(t)
	s := kv.New(eng, kv.Options{})
	ns := s.For("alice.persist")
	ctx := context.Background()
	must(ns.Set(ctx, plugin.ChatUser("c", "u"), "k", "kept"))
	must(ns.Set(ctx, plugin.Global(), "gone", "x"))
	must(ns.Delete(ctx, plugin.Global(), "gone"))
	eng = h.Reopen(t, eng)
	s = kv.New(eng, kv.Options{})
	defer s.Close(ctx)
	ns = s.For("alice.persist")
	if v, ok, err := ns.Get(ctx, plugin.ChatUser("c", "u"), "k"); err != nil || !ok || v != "kept" {
		t.Fatalf("after reopen: %q %v %v", v, ok, err)
	}
	if _, ok, _ := ns.Get(ctx, plugin.Global(), "gone"); ok {
		t.Fatal("a deleted value came back after reopen")
	}
	if u := must(s.Usage(ctx, "alice.persist")); u.Keys != 1 {
		t.Fatalf("usage after reopen = %+v", u)
	}
}

// within runs f and fails the test if it has not returned after d: the
// calls it makes must not hang.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s still running after %s", what, d)
	}
}

// An UpdateFunc runs while its key is locked (on SQLite, with the only
// writer): a store call from inside it, even through another handle of
// the namespace and with a context that never ends, fails at once instead
// of waiting for the lock its own Update holds.
func testNestedCall(t *testing.T, h Harness) {
	// The nested call must fail by itself, well before the Update would
	// give up on its function.
	const timeout = 3 * time.Second
	e := h.envOpts(t, kv.Options{Limits: kv.Limits{QuotaBytes: 1 << 20}, UpdateTimeout: timeout})
	ns := e.store.For("alice.nested")
	bg := context.Background()
	s := plugin.Chat("c")
	calls := map[string]func(plugin.Store) error{
		"get": func(st plugin.Store) error { _, _, err := st.Get(bg, s, "other"); return err },
		"set": func(st plugin.Store) error { _, err := st.Set(bg, s, "other", "x"); return err },
		"set same key": func(st plugin.Store) error {
			_, err := st.Set(bg, s, "k", "x")
			return err
		},
		"delete": func(st plugin.Store) error { _, err := st.Delete(bg, s, "k"); return err },
		"update": func(st plugin.Store) error {
			_, err := st.Update(bg, s, "other", func(string, bool) (string, error) { return "x", nil })
			return err
		},
		"keys":         func(st plugin.Store) error { _, err := st.Keys(bg, s, plugin.KeysQuery{}); return err },
		"delete scope": func(st plugin.Store) error { _, err := st.DeleteScope(bg, s); return err },
	}
	for name, call := range calls {
		within(t, 10*time.Second, "update with a nested "+name, func() {
			var inner error
			var took time.Duration
			_, err := ns.Update(bg, s, "k", func(string, bool) (string, error) {
				start := time.Now()
				inner = call(e.store.For("alice.nested")) // a fresh handle, as ctx.Store() gives
				took = time.Since(start)
				return "", inner
			})
			if took > timeout/2 {
				t.Errorf("nested %s inside an update took %s; it must fail at once", name, took)
			}
			if !errors.Is(inner, plugin.ErrNestedCall) {
				t.Errorf("nested %s inside an update: err = %v, want ErrNestedCall", name, inner)
			}
			if !errors.Is(err, plugin.ErrNestedCall) {
				t.Errorf("update with a nested %s: err = %v, want fn's ErrNestedCall", name, err)
			}
		})
	}
	e.absent(ns, s, "k")
	e.absent(ns, s, "other")
	// The store works as before, outside and inside an Update.
	within(t, 10*time.Second, "set after nested calls", func() {
		must(ns.Set(bg, s, "other", "ok"))
		must(ns.Update(bg, s, "k", func(string, bool) (string, error) { return "done", nil }))
	})
	e.want(ns, s, "other", "ok")
	e.want(ns, s, "k", "done")
}

// An UpdateFunc that does not return in time fails its Update, writes
// nothing and does not keep other writes waiting, even ones with a
// context that never ends; what it returns later is dropped.
func testSlowUpdateFunc(t *testing.T, h Harness) {
	const timeout = 300 * time.Millisecond
	e := h.envOpts(t, kv.Options{Limits: kv.Limits{QuotaBytes: 1 << 20}, UpdateTimeout: timeout})
	ns, other := e.store.For("alice.slow"), e.store.For("bob.other")
	bg := context.Background()
	started, release := make(chan struct{}), make(chan struct{})
	returned := make(chan struct{})
	defer close(release)
	updErr := make(chan error, 1)
	begin := time.Now()
	go func() {
		_, err := ns.Update(bg, plugin.Global(), "k", func(string, bool) (string, error) {
			close(started)
			<-release
			defer close(returned)
			return "late", nil
		})
		updErr <- err
	}()
	<-started
	// Writes of another plugin and of the same plugin (same usage row
	// under the quota), made while fn is stuck.
	within(t, 10*time.Second, "writes while an update function is stuck", func() {
		must(other.Set(bg, plugin.Chat("c"), "x", "1"))
		must(ns.Set(bg, plugin.Chat("c"), "y", "2"))
	})
	select {
	case err := <-updErr:
		if !errors.Is(err, plugin.ErrUpdateTimeout) {
			t.Fatalf("update with a stuck function: err = %v, want ErrUpdateTimeout", err)
		}
		if d := time.Since(begin); d < timeout {
			t.Fatalf("update gave up after %s, before its timeout of %s", d, timeout)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("update with a stuck function still running after 10s")
	}
	e.want(other, plugin.Chat("c"), "x", "1")
	e.want(ns, plugin.Chat("c"), "y", "2")
	e.absent(ns, plugin.Global(), "k")
	// Once the abandoned fn returns, its value is still not written.
	release <- struct{}{}
	<-returned
	time.Sleep(50 * time.Millisecond)
	e.absent(ns, plugin.Global(), "k")
	// The key is free again.
	must(ns.Update(bg, plugin.Global(), "k", func(string, bool) (string, error) { return "now", nil }))
	e.want(ns, plugin.Global(), "k", "now")

	// A context that ends first ends the Update the same way.
	ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer cancel()
	stuck := make(chan struct{})
	defer close(stuck)
	within(t, 10*time.Second, "update with an ending context", func() {
		_, err := ns.Update(ctx, plugin.Global(), "k", func(string, bool) (string, error) { <-stuck; return "late", nil })
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("update past its context: err = %v, want context.DeadlineExceeded", err)
		}
	})
	e.want(ns, plugin.Global(), "k", "now")
}

// A panicking UpdateFunc panics its Update, on the caller's goroutine, and
// writes nothing.
func testUpdatePanic(t *testing.T, h Harness) {
	e := h.env(t, kv.Limits{})
	ns := e.store.For("alice.panic")
	got := func() (v any) {
		defer func() { v = recover() }()
		ns.Update(e.ctx, plugin.Global(), "k", func(string, bool) (string, error) { panic("fn broke") })
		return nil
	}()
	if got != "fn broke" {
		t.Fatalf("update with a panicking function: recovered %v, want the function's panic", got)
	}
	e.absent(ns, plugin.Global(), "k")
	must(ns.Set(e.ctx, plugin.Global(), "k", "v"))
	e.want(ns, plugin.Global(), "k", "v")
}

// EraseUser forgets a user in every plugin that has data, and nothing else.
func testEraseUser(t *testing.T, h Harness) {
	e := h.env(t, kv.Limits{})
	a, b := e.store.For("alice.one"), e.store.For("bob.two")
	for _, ns := range []plugin.Store{a, b} {
		must(ns.Set(e.ctx, plugin.User("U"), "pref", "u"))
		must(ns.Set(e.ctx, plugin.ChatUser("A", "U"), "seen", "u in A"))
		must(ns.Set(e.ctx, plugin.User("V"), "pref", "v"))
		must(ns.Set(e.ctx, plugin.Chat("A"), "topic", "a"))
	}
	if got := must(e.store.Engine().Plugins(e.ctx)); len(got) != 2 || got[0] != "alice.one" || got[1] != "bob.two" {
		t.Fatalf("Plugins = %v", got)
	}
	erased := must(e.store.EraseUser(e.ctx, "U"))
	if erased["alice.one"] != 2 || erased["bob.two"] != 2 || len(erased) != 2 {
		t.Fatalf("EraseUser = %v, want 2 values in each plugin", erased)
	}
	for _, ns := range []plugin.Store{a, b} {
		e.absent(ns, plugin.User("U"), "pref")
		e.absent(ns, plugin.ChatUser("A", "U"), "seen")
		e.want(ns, plugin.User("V"), "pref", "v")
		e.want(ns, plugin.Chat("A"), "topic", "a")
	}
	if _, err := e.store.EraseUser(e.ctx, ""); err == nil {
		t.Fatal("EraseUser of an empty user was accepted")
	}
}
