// Package python_test runs the plugin documents' Python examples, as the
// documents write them (plugins/), through nekro, and checks they give
// what the Go ports give for the same inputs (the Go ports' test
// snippets).
package python_test

import (
	"path/filepath"
	"testing"

	"github.com/nekro-go/nekro/internal/testutil"
)

// run executes a Go port's test snippet in chat as user, either with the
// Go port (goPlugin) or with the Python original (pyPlugin) enabled alone.
func run(t *testing.T, data, enable, chat, user, snippet string) string {
	t.Helper()
	args := []string{"--data", data, "--plugin-dir", "plugins", "--plugins", enable, "exec", "--chat", chat, "--user", user, snippet}
	r := testutil.RunNekro(t, nil, args...)
	if r.Code != 0 {
		t.Fatalf("%s with %s in %s as %s: exit %d\n%s%s", filepath.Base(snippet), enable, chat, user, r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// Seed 000's KV examples: save_preference, get_preference, clear_cache,
// add_note and get_note give the same output from the document's Python
// and from the Go port, step by step, across two chats and two users.
func TestKVStoreExamplesMatchTheGoPort(t *testing.T) {
	const goPlugin, pyPlugin = "nekro_examples.kvstore", "nekro_docs.kvstore_doc"
	goData, pyData := testutil.DataDir(t), testutil.DataDir(t)
	steps := []struct{ chat, user, snippet string }{
		{"group_A", "U", "save_preference.py"},
		{"group_B", "U", "get_preference.py"},
		{"group_A", "V", "get_preference.py"},
		{"group_A", "U", "clear_cache.py"},
		{"group_A", "U", "add_note.py"},
		{"group_B", "U", "get_note.py"},
		{"group_A", "V", "get_note.py"},
	}
	for _, s := range steps {
		snippet := filepath.Join("..", "kvstore", "testdata", s.snippet)
		goOut := run(t, goData, goPlugin, s.chat, s.user, snippet)
		pyOut := run(t, pyData, pyPlugin, s.chat, s.user, snippet)
		if goOut != pyOut {
			t.Errorf("%s in %s as %s:\nGo port:\n%s\nthe document's Python:\n%s", s.snippet, s.chat, s.user, goOut, pyOut)
		}
	}
	// The values stored are the same too, as nekro kv reads them.
	for _, k := range [][]string{{"--chat", "group_A", "last_command"}, {"--user", "U", "preferences"}} {
		g := testutil.RunNekro(t, nil, append([]string{"--data", goData, "kv", "--plugin", goPlugin, "get"}, k...)...)
		p := testutil.RunNekro(t, nil, append([]string{"--data", pyData, "kv", "--plugin", pyPlugin, "get"}, k...)...)
		if g.Stdout != p.Stdout || g.Code != 0 {
			t.Errorf("kv get %v: Go port %q, Python %q", k, g.Stdout, p.Stdout)
		}
	}
}
