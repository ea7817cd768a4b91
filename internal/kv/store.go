package kv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/plugin"
)

// UpdateFunc computes a key's new value from its current one (found is
// false when the key does not exist): what plugin.Store.Update takes.
type UpdateFunc = func(current string, found bool) (next string, err error)

// Options configure a Store.
type Options struct {
	Limits Limits
	// SweepEvery, if positive, starts a goroutine that deletes expired
	// values that often (they are invisible from the moment they expire;
	// the sweep only reclaims their space and quota).
	SweepEvery time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log receives sweep failures; nil means slog.Default().
	Log *slog.Logger
	// UpdateTimeout bounds how long an UpdateFunc may run while its key is
	// locked (on SQLite, while it holds the database's only writer): past
	// it the Update fails with plugin.ErrUpdateTimeout and writes nothing.
	// 0 means DefaultUpdateTimeout.
	UpdateTimeout time.Duration
}

// DefaultUpdateTimeout is how long an UpdateFunc may run by default. An
// UpdateFunc computes a value from a value; it needs microseconds.
const DefaultUpdateTimeout = 5 * time.Second

// Store is the front of the KV store: it checks every call, then hands it
// to its Engine. Build it with New; For gives each plugin its namespace.
type Store struct {
	eng  Engine
	lim  Limits
	upd  time.Duration
	now  func() time.Time
	log  *slog.Logger
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// New returns a store over eng. The store owns eng: Close closes it.
func New(eng Engine, opts Options) *Store {
	s := &Store{eng: eng, lim: opts.Limits, upd: opts.UpdateTimeout, now: opts.Now, log: opts.Log}
	if s.upd <= 0 {
		s.upd = DefaultUpdateTimeout
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if opts.SweepEvery > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		s.stop = cancel
		s.wg.Add(1)
		go s.sweeper(ctx, opts.SweepEvery)
	}
	return s
}

// Engine returns the store's engine.
func (s *Store) Engine() Engine { return s.eng }

// Close stops the sweeper and closes the engine.
func (s *Store) Close(ctx context.Context) error {
	if s.stop != nil {
		s.stop()
		s.wg.Wait()
	}
	return s.eng.Close(ctx)
}

func (s *Store) sweeper(ctx context.Context, every time.Duration) {
	defer s.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("kv sweep failed", "err", err)
			}
		}
	}
}

// Sweep deletes every value that has expired and returns how many.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	const batch = 1000
	var total int64
	now := s.now()
	for {
		n, err := s.eng.DeleteExpired(ctx, now, batch)
		total += n
		if err != nil {
			return total, fmt.Errorf("kv sweep: %w", err)
		}
		if n < batch {
			return total, nil
		}
	}
}

// Usage returns what a plugin's values take up.
func (s *Store) Usage(ctx context.Context, pluginKey string) (Usage, error) {
	u, err := s.eng.Usage(ctx, pluginKey)
	if err != nil {
		return Usage{}, fmt.Errorf("kv usage of %s: %w", pluginKey, err)
	}
	return u, nil
}

// DeletePlugin deletes every value of a plugin, in every scope, and
// returns how many. It is for operators (a plugin removed for good);
// plugins themselves cannot erase their whole namespace at once.
func (s *Store) DeletePlugin(ctx context.Context, pluginKey string) (int64, error) {
	if err := checkText("plugin key", pluginKey, MaxPluginKeyLen, false); err != nil {
		return 0, fmt.Errorf("kv delete plugin: %w", err)
	}
	n, err := s.eng.DeleteScope(ctx, pluginKey, "", "")
	if err != nil {
		return n, fmt.Errorf("kv delete plugin %s: %w", pluginKey, err)
	}
	return n, nil
}

// EraseUser deletes a user's values in every plugin's namespace (the
// user's own scope and their chat+user scopes in every chat), including
// plugins no longer compiled in, and returns how many it deleted per
// plugin. It is for operators honouring a request to forget a user.
func (s *Store) EraseUser(ctx context.Context, userKey string) (map[string]int64, error) {
	if err := checkText("user key", userKey, MaxScopeKeyLen, false); err != nil {
		return nil, fmt.Errorf("kv erase user: %w", err)
	}
	plugins, err := s.eng.Plugins(ctx)
	if err != nil {
		return nil, fmt.Errorf("kv erase user: %w", err)
	}
	out := map[string]int64{}
	for _, p := range plugins {
		n, err := s.eng.DeleteScope(ctx, p, "", userKey)
		if err != nil {
			return out, fmt.Errorf("kv erase user in %s: %w", p, err)
		}
		if n > 0 {
			out[p] = n
		}
	}
	return out, nil
}

// For returns the namespace of the plugin with the given key. It panics on
// a key that is empty or too long: plugin keys come from registered
// plugins, not from users.
func (s *Store) For(pluginKey string) plugin.Store {
	if err := checkText("plugin key", pluginKey, MaxPluginKeyLen, false); err != nil {
		panic(fmt.Sprintf("kv: For(%q): %v", pluginKey, err))
	}
	return &namespace{s: s, plugin: pluginKey}
}

// namespace is one plugin's view of the store.
type namespace struct {
	s      *Store
	plugin string
}

var _ plugin.Store = (*namespace)(nil)

func (n *namespace) fail(op string, scope plugin.Scope, name string, err error) error {
	if name == "" {
		return fmt.Errorf("kv %s %s %s: %w", op, n.plugin, scope, err)
	}
	return fmt.Errorf("kv %s %s %s key %q: %w", op, n.plugin, scope, name, err)
}

func live(e Entry, found bool, now time.Time) bool {
	return found && (e.ExpiresAt.IsZero() || now.Before(e.ExpiresAt))
}

// expiry turns options into an expiry time; keep is the expiry to keep
// when no option says otherwise.
func expiry(o pluginhost.SetOptions, now, keep time.Time) (time.Time, error) {
	switch {
	case !o.Expiry:
		return keep, nil
	case o.HasTTL && o.TTL <= 0:
		return time.Time{}, fmt.Errorf("TTL %s is not positive", o.TTL)
	case o.HasTTL:
		return now.Add(o.TTL).Truncate(time.Millisecond), nil
	}
	return o.ExpiresAt.Truncate(time.Millisecond), nil
}

func (n *namespace) checkValue(v string) error {
	if m := n.s.lim.maxValue(); m >= 0 && int64(len(v)) > m {
		return &LimitError{What: "value", Size: int64(len(v)), Limit: m}
	}
	return nil
}

// checkQuota refuses a change that would put the plugin over its quota.
func (n *namespace) checkQuota(cur Entry, found bool, u Usage, name, value string) error {
	q := n.s.lim.quota()
	if q < 0 {
		return nil
	}
	old := int64(0)
	if found {
		old = cur.Size
	}
	size := Size(name, value)
	after := u.Bytes - old + size
	if size > old && after > q {
		extra := fmt.Sprintf("in use %d bytes, this key and value %d bytes", u.Bytes, size)
		if h := n.s.lim.QuotaHint; h != "" {
			extra += "; " + h
		}
		return &LimitError{What: "quota of plugin " + n.plugin, Size: after, Limit: q, Extra: extra}
	}
	return nil
}

func (n *namespace) Get(ctx context.Context, scope plugin.Scope, name string) (string, bool, error) {
	if err := nested(); err != nil {
		return "", false, n.fail("get", scope, name, err)
	}
	k, err := key(n.plugin, scope, name)
	if err != nil {
		return "", false, n.fail("get", scope, name, err)
	}
	e, found, err := n.s.eng.Get(ctx, k)
	if err != nil {
		return "", false, n.fail("get", scope, name, err)
	}
	if !live(e, found, n.s.now()) {
		return "", false, nil
	}
	return e.Value, true, nil
}

func (n *namespace) Set(ctx context.Context, scope plugin.Scope, name, value string, opts ...plugin.SetOption) (plugin.SetResult, error) {
	if err := nested(); err != nil {
		return 0, n.fail("set", scope, name, err)
	}
	k, err := key(n.plugin, scope, name)
	if err == nil {
		err = n.checkValue(value)
	}
	now := n.s.now()
	var exp time.Time
	if err == nil {
		exp, err = expiry(pluginhost.ApplySetOptions(opts), now, time.Time{})
	}
	if err != nil {
		return 0, n.fail("set", scope, name, err)
	}
	res := plugin.Created
	err = n.s.eng.Apply(ctx, k, n.s.lim.quota() >= 0, func(cur Entry, found bool, u Usage) (Change, error) {
		if live(cur, found, now) {
			res = plugin.Updated
		}
		if err := n.checkQuota(cur, found, u, name, value); err != nil {
			return Change{}, err
		}
		return Change{Op: Put, Value: value, ExpiresAt: exp}, nil
	})
	if err != nil {
		return 0, n.fail("set", scope, name, err)
	}
	return res, nil
}

func (n *namespace) Delete(ctx context.Context, scope plugin.Scope, name string) (plugin.DeleteResult, error) {
	if err := nested(); err != nil {
		return 0, n.fail("delete", scope, name, err)
	}
	k, err := key(n.plugin, scope, name)
	if err != nil {
		return 0, n.fail("delete", scope, name, err)
	}
	now := n.s.now()
	res := plugin.NotFound
	err = n.s.eng.Apply(ctx, k, false, func(cur Entry, found bool, _ Usage) (Change, error) {
		if !found {
			return Change{Op: Keep}, nil
		}
		if live(cur, found, now) {
			res = plugin.Deleted
		}
		return Change{Op: Remove}, nil // an expired row goes too
	})
	if err != nil {
		return 0, n.fail("delete", scope, name, err)
	}
	return res, nil
}

func (n *namespace) Update(ctx context.Context, scope plugin.Scope, name string, fn UpdateFunc, opts ...plugin.SetOption) (string, error) {
	if err := nested(); err != nil {
		return "", n.fail("update", scope, name, err)
	}
	k, err := key(n.plugin, scope, name)
	if err == nil && fn == nil {
		err = errors.New("nil update function")
	}
	if err != nil {
		return "", n.fail("update", scope, name, err)
	}
	o := pluginhost.ApplySetOptions(opts)
	now := n.s.now()
	var out string
	err = n.s.eng.Apply(ctx, k, n.s.lim.quota() >= 0, func(cur Entry, found bool, u Usage) (Change, error) {
		ok := live(cur, found, now)
		old, keep := "", time.Time{}
		if ok {
			old, keep = cur.Value, cur.ExpiresAt
		}
		next, err := n.s.callUpdateFunc(ctx, fn, old, ok)
		if err != nil {
			return Change{}, err
		}
		if err := n.checkValue(next); err != nil {
			return Change{}, err
		}
		exp, err := expiry(o, now, keep)
		if err != nil {
			return Change{}, err
		}
		if err := n.checkQuota(cur, found, u, name, next); err != nil {
			return Change{}, err
		}
		out = next
		return Change{Op: Put, Value: next, ExpiresAt: exp}, nil
	})
	if err != nil {
		var fe *updateFuncError
		if errors.As(err, &fe) {
			return "", fe.err // the plugin's own error, as it returned it
		}
		var fp *updateFuncPanic
		if errors.As(err, &fp) {
			panic(fp.v) // on the caller's goroutine, as if fn ran there
		}
		return "", n.fail("update", scope, name, err)
	}
	return out, nil
}

const (
	defaultPage = 100
	maxPage     = 1000
)

func (n *namespace) Keys(ctx context.Context, scope plugin.Scope, q plugin.KeysQuery) (plugin.KeysPage, error) {
	if err := nested(); err != nil {
		return plugin.KeysPage{}, n.fail("keys", scope, "", err)
	}
	if err := scope.Check(); err != nil {
		return plugin.KeysPage{}, n.fail("keys", scope, "", err)
	}
	if err := checkText("key prefix", q.Prefix, MaxNameLen, true); err != nil {
		return plugin.KeysPage{}, n.fail("keys", scope, "", err)
	}
	if err := checkText("cursor", q.Cursor, MaxNameLen, true); err != nil {
		return plugin.KeysPage{}, n.fail("keys", scope, "", err)
	}
	limit := q.Limit
	switch {
	case limit < 0:
		return plugin.KeysPage{}, n.fail("keys", scope, "", fmt.Errorf("limit %d is negative", limit))
	case limit == 0:
		limit = defaultPage
	case limit > maxPage:
		limit = maxPage
	}
	now := n.s.now()
	page := plugin.KeysPage{Keys: []string{}}
	after := q.Cursor
	for {
		// Ask for one more than needed, to know whether a next page exists.
		rows, err := n.s.eng.List(ctx, ListQuery{Plugin: n.plugin, Chat: scope.ChatKey, User: scope.UserKey,
			Prefix: q.Prefix, After: after, Limit: limit + 1 - len(page.Keys)})
		if err != nil {
			return plugin.KeysPage{}, n.fail("keys", scope, "", err)
		}
		want := limit + 1 - len(page.Keys)
		for _, e := range rows {
			after = e.Key.Name
			if !strings.HasPrefix(e.Key.Name, q.Prefix) || !live(e, true, now) {
				continue // expired, or outside the prefix
			}
			if len(page.Keys) == limit {
				page.Next = page.Keys[limit-1]
				return page, nil
			}
			page.Keys = append(page.Keys, e.Key.Name)
		}
		if len(rows) < want {
			return page, nil // the scope has no more rows
		}
	}
}

func (n *namespace) DeleteScope(ctx context.Context, scope plugin.Scope) (int, error) {
	if err := nested(); err != nil {
		return 0, n.fail("delete scope", scope, "", err)
	}
	if err := scope.Check(); err != nil {
		return 0, n.fail("delete scope", scope, "", err)
	}
	if scope.ChatKey == "" && scope.UserKey == "" { // the global scope (Check refused a chat or user scope without its key)
		return 0, n.fail("delete scope", scope, "", errors.New("refusing to delete the global scope: it would erase the plugin's whole namespace"))
	}
	for _, c := range []struct{ kind, s string }{{"chat key", scope.ChatKey}, {"user key", scope.UserKey}} {
		if err := checkText(c.kind, c.s, MaxScopeKeyLen, true); err != nil {
			return 0, n.fail("delete scope", scope, "", err)
		}
	}
	cnt, err := n.s.eng.DeleteScope(ctx, n.plugin, scope.ChatKey, scope.UserKey)
	if err != nil {
		return int(cnt), n.fail("delete scope", scope, "", err)
	}
	return int(cnt), nil
}
