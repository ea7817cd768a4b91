package kv

import (
	"errors"
	"fmt"

	"github.com/nekro-go/nekro/internal/keys"
	"github.com/nekro-go/nekro/plugin"
)

// The reference's column widths, in bytes of UTF-8 (the rules are
// package keys').
const (
	// MaxNameLen is the longest store key.
	MaxNameLen = keys.MaxNameLen
	// MaxScopeKeyLen is the longest chat or user key.
	MaxScopeKeyLen = keys.MaxScopeLen
	// MaxPluginKeyLen is the longest plugin key.
	MaxPluginKeyLen = keys.MaxPluginLen
	// DefaultMaxValueBytes caps a value at 1 MiB, the size below which the
	// reference's guide advises the KV store (it never enforced it).
	DefaultMaxValueBytes = 1 << 20
	// DefaultQuotaBytes caps what one plugin's values take up, 256 MiB:
	// far above what the reference's plugins keep, and low enough that a
	// runaway plugin cannot fill a shared host's disk through the
	// database (a seed example grew it by 309 MiB in 20 s).
	DefaultQuotaBytes = 256 << 20
)

// Limits are the checks the front makes before any write.
type Limits struct {
	// MaxValueBytes caps one value; 0 means DefaultMaxValueBytes, and a
	// negative value means no cap.
	MaxValueBytes int64
	// QuotaBytes caps what one plugin's values take up (see Size); 0 means
	// DefaultQuotaBytes and a negative value no quota. It is checked
	// before the write, in the write's transaction, so concurrent writers
	// cannot overshoot it together.
	QuotaBytes int64
	// QuotaHint, when set, ends a quota refusal: where the operator
	// changes the quota (the CLI says "--kv-quota").
	QuotaHint string
}

func (l Limits) quota() int64 {
	switch {
	case l.QuotaBytes == 0:
		return DefaultQuotaBytes
	case l.QuotaBytes < 0:
		return -1
	}
	return l.QuotaBytes
}

func (l Limits) maxValue() int64 {
	switch {
	case l.MaxValueBytes == 0:
		return DefaultMaxValueBytes
	case l.MaxValueBytes < 0:
		return -1
	}
	return l.MaxValueBytes
}

// LimitError is a refusal for size. Its text names the limit and the size;
// it matches plugin.ErrLimit with errors.Is.
type LimitError struct {
	What  string // "store key", "chat key", "value", "quota of plugin a.b"
	Size  int64  // the size that was refused
	Limit int64
	Extra string // more context, e.g. the value's own size under a quota
}

func (e *LimitError) Error() string {
	s := fmt.Sprintf("%s is %d bytes, over the limit of %d bytes", e.What, e.Size, e.Limit)
	if e.Extra != "" {
		s += " (" + e.Extra + ")"
	}
	return s
}

// Unwrap makes errors.Is(err, plugin.ErrLimit) true.
func (e *LimitError) Unwrap() error { return plugin.ErrLimit }

// checkText checks a key with keys.Check; a key too long is a LimitError
// (errors.Is plugin.ErrLimit), as values over their limit are.
func checkText(kind, s string, max int, allowEmpty bool) error {
	err := keys.Check(kind, s, max, allowEmpty)
	var tl *keys.TooLongError
	if errors.As(err, &tl) {
		return &LimitError{What: kind, Size: int64(tl.Len), Limit: int64(tl.Max)}
	}
	return err
}

// key builds and checks the Key of name in scope.
func key(pluginKey string, scope plugin.Scope, name string) (Key, error) {
	if err := scope.Check(); err != nil {
		return Key{}, err
	}
	if err := checkText("chat key", scope.ChatKey, MaxScopeKeyLen, true); err != nil {
		return Key{}, err
	}
	if err := checkText("user key", scope.UserKey, MaxScopeKeyLen, true); err != nil {
		return Key{}, err
	}
	if err := checkText("store key", name, MaxNameLen, false); err != nil {
		return Key{}, err
	}
	return Key{Plugin: pluginKey, Chat: scope.ChatKey, User: scope.UserKey, Name: name}, nil
}
