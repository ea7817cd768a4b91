// Package kv is the plugin KV store: the front that plugins reach through
// plugin.Store, and the contract, Engine, that storage engines implement.
//
// The split follows database/sql and its driver package. Store (the front)
// does every check once, the same for all engines: scopes, key lengths,
// the value cap, the per-plugin quota and expiry. An Engine only stores
// rows and runs one read-modify-write at a time per key; it knows nothing
// of limits, and it does not decide whether a value has expired (it stores
// the expiry time and hands it back).
//
// Engines live in internal/kv/sqlite (the default, embedded) and
// internal/kv/postgres; internal/kv/kvtest is the conformance suite both
// must pass, and internal/kv/kvopen picks one from configuration.
package kv

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"
)

// Key locates one value: a plugin's namespace, a scope and a name. Chat
// and User are "" when the scope does not have them.
type Key struct {
	Plugin string
	Chat   string
	User   string
	Name   string
}

// Entry is a stored value.
type Entry struct {
	Key       Key
	Value     string    // empty in List results
	ExpiresAt time.Time // zero: never expires
	Size      int64     // bytes counted against the plugin's quota
}

// Usage is what a plugin's rows take up.
type Usage struct {
	Bytes int64 // sum of Size over the plugin's rows, expired ones included
	Keys  int64 // number of rows
}

// Size is what a value costs its plugin's quota: the bytes of its name and
// its value. Engines store it with each row.
func Size(name, value string) int64 { return int64(len(name) + len(value)) }

// Op is what Apply does with a key.
type Op int

const (
	// Keep leaves the key as it is.
	Keep Op = iota
	// Put writes Change.Value and Change.ExpiresAt.
	Put
	// Remove deletes the key.
	Remove
)

// Change is the outcome of an ApplyFunc.
type Change struct {
	Op        Op
	Value     string
	ExpiresAt time.Time // zero: never expires
}

// ApplyFunc decides a key's change from its current row. found is false
// when there is no row; cur is then zero. usage is the plugin's usage
// before the change, and is zero unless Apply was asked for it.
type ApplyFunc func(cur Entry, found bool, usage Usage) (Change, error)

// ListQuery selects rows of exactly one scope (Plugin, Chat, User), with
// names that start with Prefix and sort after After, in byte order.
type ListQuery struct {
	Plugin, Chat, User string
	Prefix             string
	After              string // "" for the first page
	Limit              int    // > 0
}

// Engine is the contract of a storage engine. All methods are safe for
// concurrent use, take a context that cancels them, and return errors
// wrapped with a short phrase. Names, chats, users and plugins are valid
// UTF-8 without control characters (the front checks); values are any
// bytes, and an engine returns them exactly as given.
type Engine interface {
	// Get returns the row of k. A missing row is (Entry{}, false, nil),
	// never an error. Rows past their expiry are returned like any other.
	Get(ctx context.Context, k Key) (Entry, bool, error)

	// Apply runs fn on the current row of k and writes the Change it
	// returns, atomically: from the read to the write no other Apply,
	// DeleteScope or DeleteExpired can change k, in this process or any
	// other using the same database. fn is called exactly once; if it
	// returns an error nothing is written and Apply returns that error
	// unwrapped. withUsage asks for the plugin's usage to be read in the
	// same transaction (writes of that plugin may then serialize). The
	// plugin's Usage is kept up to date in the same transaction as every
	// write. When Apply returns nil after a Put or Remove, the change is
	// committed.
	Apply(ctx context.Context, k Key, withUsage bool, fn ApplyFunc) error

	// List returns up to q.Limit rows of one scope in byte order of their
	// names, without their values.
	List(ctx context.Context, q ListQuery) ([]Entry, error)

	// DeleteScope deletes the plugin's rows whose chat is chat (if chat is
	// not "") and whose user is user (if user is not ""); with both empty
	// it deletes all the plugin's rows. It returns how many it deleted.
	DeleteScope(ctx context.Context, plugin, chat, user string) (int64, error)

	// DeleteExpired deletes up to limit rows, of any plugin, whose expiry
	// is not zero and not after before. It returns how many it deleted.
	DeleteExpired(ctx context.Context, before time.Time, limit int) (int64, error)

	// Usage returns what the plugin's rows take up.
	Usage(ctx context.Context, plugin string) (Usage, error)

	// Plugins returns the keys of the plugins that have rows, sorted.
	Plugins(ctx context.Context) ([]string, error)

	// Close releases the engine's connections.
	Close(ctx context.Context) error
}

// PrefixEnd returns the smallest string greater than every string that
// starts with prefix, for a range scan name >= prefix AND name < end; ok
// is false when there is no such bound (an empty prefix). The result is
// valid UTF-8 whenever prefix is, since it increments the last code point.
func PrefixEnd(prefix string) (end string, ok bool) {
	for prefix != "" {
		r, n := utf8.DecodeLastRuneInString(prefix)
		prefix = prefix[:len(prefix)-n]
		if r == utf8.RuneError && n <= 1 {
			return "", false // not UTF-8; the front never passes such a prefix
		}
		switch {
		case r == utf8.MaxRune:
			continue // no greater code point: carry into the previous one
		case r == 0xD7FF:
			r = 0xE000 // skip the surrogates, which UTF-8 cannot hold
		default:
			r++
		}
		var sb strings.Builder
		sb.WriteString(prefix)
		sb.WriteRune(r)
		return sb.String(), true
	}
	return "", false
}
