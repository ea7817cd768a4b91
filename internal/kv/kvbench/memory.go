package kvbench

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nekro-go/nekro/internal/kv"
)

// memory is the benchmark's ceiling: a map behind a mutex, reached through
// the same kv.Store front as the real engines. It is not durable and is
// not offered as an engine.
type memory struct {
	mu   sync.RWMutex
	rows map[kv.Key]kv.Entry
	use  map[string]kv.Usage
}

func newMemory() *memory {
	return &memory{rows: map[kv.Key]kv.Entry{}, use: map[string]kv.Usage{}}
}

func (m *memory) Get(_ context.Context, k kv.Key) (kv.Entry, bool, error) {
	m.mu.RLock()
	e, ok := m.rows[k]
	m.mu.RUnlock()
	return e, ok, nil
}

func (m *memory) Apply(_ context.Context, k kv.Key, _ bool, fn kv.ApplyFunc) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, found := m.rows[k]
	ch, err := fn(cur, found, m.use[k.Plugin])
	if err != nil {
		return err
	}
	u := m.use[k.Plugin]
	if found && ch.Op != kv.Keep {
		u.Bytes -= cur.Size
		u.Keys--
	}
	switch ch.Op {
	case kv.Put:
		e := kv.Entry{Key: k, Value: ch.Value, ExpiresAt: ch.ExpiresAt, Size: kv.Size(k.Name, ch.Value)}
		m.rows[k] = e
		u.Bytes += e.Size
		u.Keys++
	case kv.Remove:
		delete(m.rows, k)
	}
	m.use[k.Plugin] = u
	return nil
}

func (m *memory) List(_ context.Context, q kv.ListQuery) ([]kv.Entry, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []kv.Entry
	for k, e := range m.rows {
		if k.Plugin == q.Plugin && k.Chat == q.Chat && k.User == q.User && k.Name > q.After && strings.HasPrefix(k.Name, q.Prefix) {
			out = append(out, kv.Entry{Key: k, ExpiresAt: e.ExpiresAt})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key.Name < out[j].Key.Name })
	if len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

func (m *memory) DeleteScope(context.Context, string, string, string) (int64, error) { return 0, nil }

func (m *memory) DeleteExpired(context.Context, time.Time, int) (int64, error) { return 0, nil }

func (m *memory) Usage(_ context.Context, plugin string) (kv.Usage, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.use[plugin], nil
}

func (m *memory) Plugins(context.Context) ([]string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []string
	for p, u := range m.use {
		if u.Keys > 0 {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (m *memory) Close(context.Context) error { return nil }
