// Package keys holds the one rule for each kind of key nekro stores or
// names a directory after: chat and user keys, store keys, plugin keys.
// The KV store, the file layout and the plugin SDK all check through here.
package keys

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// The reference's column widths, in bytes of UTF-8.
const (
	// MaxScopeLen is the longest chat or user key (VARCHAR(256)).
	MaxScopeLen = 256
	// MaxNameLen is the longest KV store key.
	MaxNameLen = 128
	// MaxPluginLen is the longest plugin key.
	MaxPluginLen = 128
)

// TooLongError is a key over its kind's length limit.
type TooLongError struct {
	Kind     string // "chat key", "user key", ...
	Len, Max int
}

func (e *TooLongError) Error() string {
	return fmt.Sprintf("%s is %d bytes, over the limit of %d", e.Kind, e.Len, e.Max)
}

// Check checks a key of the given kind ("chat key", "store key", ...):
// at most max bytes of UTF-8 without control characters, and not empty
// unless allowed. A key too long is a *TooLongError.
func Check(kind, key string, max int, allowEmpty bool) error {
	switch {
	case key == "" && !allowEmpty:
		return fmt.Errorf("%s is empty", kind)
	case len(key) > max:
		return &TooLongError{Kind: kind, Len: len(key), Max: max}
	case !utf8.ValidString(key):
		return fmt.Errorf("%s %q is not valid UTF-8", kind, key)
	case strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("%s %q contains control characters", kind, key)
	}
	return nil
}

// Scope checks a chat or user key: kind is "chat" or "user".
func Scope(kind, key string) error { return Check(kind+" key", key, MaxScopeLen, false) }

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Ident reports whether s is a Python identifier (ASCII): letters, digits
// and _, not starting with a digit. Plugin authors and module names, and
// sandbox method and parameter names, are identifiers.
func Ident(s string) bool { return identRE.MatchString(s) }

// Plugin checks a plugin key: author.module, two identifiers, at most
// MaxPluginLen bytes.
func Plugin(key string) error {
	author, module, ok := strings.Cut(key, ".")
	if !ok || !Ident(author) || !Ident(module) {
		return fmt.Errorf("plugin key %q is not author.module (two identifiers joined by a dot)", key)
	}
	if len(key) > MaxPluginLen {
		return &TooLongError{Kind: "plugin key", Len: len(key), Max: MaxPluginLen}
	}
	return nil
}
