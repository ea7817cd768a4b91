package files

import (
	"strings"
	"testing"
)

// Distinct chat keys never share a directory, and every result is one
// safe path component.
func TestSanitizeChatKeyIsInjective(t *testing.T) {
	keys := []string{
		"group_42", "group:42", "group_42-c9042efcbc90", SanitizeChatKey("group:42"),
		"a:b", "a_b", ".", "..", "...", ".hidden", "", "/", "a/b", "a\\b", "日本語",
		strings.Repeat("x", 64), strings.Repeat("x", 65), strings.Repeat("x", 200),
		"onebot_v11-group_12345678", "x-0123456789ab", "x-0123456789AB",
	}
	seen := map[string]string{}
	for _, k := range keys {
		d := SanitizeChatKey(k)
		if d == "" || d == "." || d == ".." || strings.ContainsAny(d, "/\\\x00") || strings.HasPrefix(d, ".") || len(d) > 64 {
			t.Errorf("SanitizeChatKey(%q) = %q: not a safe directory name", k, d)
		}
		if other, dup := seen[d]; dup && other != k {
			t.Errorf("%q and %q share directory %q", other, k, d)
		}
		seen[d] = k
	}
	if got := SanitizeChatKey("onebot_v11-group_12345678"); got != "onebot_v11-group_12345678" {
		t.Errorf("a plain key changed: %q", got)
	}
}
