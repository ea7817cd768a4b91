package files

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// A chat's directories are mount points, listed in the world-readable
// mount table: their names are a keyed hash of the key, the same for
// every process on the data directory, different on another one.
func TestChatDirectoriesAreNamedOpaquely(t *testing.T) {
	root := filepath.Join(t.TempDir(), "data")
	const chat = "onebot_v11-private_123456789"
	layouts := make([]Layout, 4)
	var wg sync.WaitGroup
	for i := range layouts {
		wg.Go(func() {
			l, err := OpenLayout(root)
			if err != nil {
				t.Error(err)
			}
			layouts[i] = l
		})
	}
	wg.Wait()
	up, shared := layouts[0].UploadsDir(chat), layouts[0].SharedDir(ContainerKey(chat))
	for _, l := range append(layouts[1:], Layout{Root: root}) {
		if l.UploadsDir(chat) != up || l.SharedDir(ContainerKey(chat)) != shared {
			t.Errorf("processes disagree on the chat's directories: %s %s vs %s %s", l.UploadsDir(chat), l.SharedDir(ContainerKey(chat)), up, shared)
		}
	}
	for _, d := range []string{up, shared} {
		if strings.Contains(d, "123456789") {
			t.Errorf("%s names the chat", d)
		}
	}
	if up == layouts[0].UploadsDir("onebot_v11-private_123456780") {
		t.Error("two chats share an uploads directory")
	}
	other, err := OpenLayout(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(other.UploadsDir(chat)) == filepath.Base(up) {
		t.Error("another data directory names the chat alike: the name is not keyed")
	}
	if fi, err := os.Stat(filepath.Join(root, NameKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("name key: %v %v", fi, err)
	}
}

// A previous version's directories, named after the chat key, are
// renamed to the opaque names on first use, files and all.
func TestLegacyChatDirectoriesAreAdopted(t *testing.T) {
	root := filepath.Join(t.TempDir(), "data")
	const chat = "onebot_v11-private_123456789"
	for _, f := range []string{"uploads/" + chat + "/a.txt", "sandboxes/sandbox_" + chat + "/b.txt"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), []byte(f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l, err := OpenLayout(root)
	if err != nil {
		t.Fatal(err)
	}
	if !l.HasUploadsDir(chat) {
		t.Error("HasUploadsDir misses the legacy directory")
	}
	up, err := l.EnsureUploadsDir(chat)
	if err != nil {
		t.Fatal(err)
	}
	shared, err := l.EnsureSharedDir(chat)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(up, "a.txt"), filepath.Join(shared, "b.txt")} {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
	for _, old := range []string{"uploads/" + chat, "sandboxes/sandbox_" + chat} {
		if _, err := os.Lstat(filepath.Join(root, old)); err == nil {
			t.Errorf("%s is still there", old)
		}
	}
}

// A data directory whose name key was lost (not restored with the rest
// of a backup) is refused with a clear error, not given a new key that
// would silently orphan every chat's files.
func TestLostNameKeyIsNotReplaced(t *testing.T) {
	root := filepath.Join(t.TempDir(), "data")
	l, err := OpenLayout(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.EnsureUploadsDir("team"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, NameKeyFile)); err != nil {
		t.Fatal(err)
	}
	_, err = OpenLayout(root)
	if err == nil || !strings.Contains(err.Error(), "restore it from a backup") {
		t.Fatalf("a lost name key: %v", err)
	}
	if _, serr := os.Stat(filepath.Join(root, NameKeyFile)); serr == nil {
		t.Error("a new name key was made over the lost one")
	}
}
