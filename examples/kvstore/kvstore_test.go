package kvstore_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nekro-go/nekro/internal/kv/kvtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

// The KV examples of seeds 000/001/004, driven by Python snippets through
// `nekro exec`: the binary, sandbox and store a user gets. Two chats
// (group_A, group_B) and two users (U, V) show each scope's isolation.

const plugin = "nekro_examples.kvstore"

type nekro struct {
	t    *testing.T
	data string
}

// exec runs a snippet in chat as user ("" for none) and returns its output.
func (n nekro) exec(chat, user, snippet string, extra ...string) (string, int) {
	n.t.Helper()
	// The example is named: in the default set it gives way to the
	// built-in nekro.note, whose get_note it shares.
	args := []string{"--data", n.data, "--plugins", plugin, "exec", "--chat", chat}
	if user != "" {
		args = append(args, "--user", user)
	}
	args = append(args, extra...)
	args = append(args, filepath.Join("testdata", snippet))
	r := testutil.RunNekroExamples(n.t, nil, args...)
	if r.Code != 0 {
		n.t.Logf("%s in %s as %q: exit %d\n%s%s", snippet, chat, user, r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout, r.Code
}

func (n nekro) want(chat, user, snippet, want string) {
	n.t.Helper()
	out, code := n.exec(chat, user, snippet)
	if code != 0 || out != want {
		n.t.Fatalf("%s in %s as %q (exit %d):\n%s\nwant:\n%s", snippet, chat, user, code, out, want)
	}
}

// kv runs `nekro kv ARGS --plugin nekro_examples.kvstore`.
func (n nekro) kv(args ...string) (string, int) {
	n.t.Helper()
	r := testutil.RunNekroExamples(n.t, nil, append([]string{"--data", n.data, "kv", "--plugin", plugin}, args...)...)
	return r.Stdout, r.Code
}

func TestSeedExamplesSQLite(t *testing.T) {
	t.Setenv("NEKRO_DATABASE_URL", "")
	testSeedExamples(t, nekro{t: t, data: testutil.DataDir(t)})
}

func TestSeedExamplesPostgres(t *testing.T) {
	t.Setenv("NEKRO_DATABASE_URL", kvtest.FreshSchema(t, kvtest.PostgresURL(t)))
	testSeedExamples(t, nekro{t: t, data: testutil.DataDir(t)})
}

func testSeedExamples(t *testing.T, n nekro) {
	// save_preference writes all three scopes; the user's preferences then
	// follow U into every chat, and only U.
	n.want("group_A", "U", "save_preference.py", "偏好设置已保存\n偏好: {'theme': 'dark', 'notifications': True}\n")
	n.want("group_B", "U", "get_preference.py", "偏好: {'theme': 'dark', 'notifications': True}\n")
	n.want("group_A", "V", "get_preference.py", "偏好: {'theme': 'light', 'notifications': False}\n")
	n.want("group_B", "U", "get_user_preference.py", "用户的主题是: dark\nNone\n")

	// get_user_preference reads only the run's own user: user_id comes from
	// the AI, so another chat's user naming U must not get U's secrets.
	n.want("U_dm", "U", "save_api_key.py", "偏好设置已保存\n")
	for _, who := range []struct{ chat, user string }{{"other", "V"}, {"U_dm", "V"}, {"other", ""}} {
		out, code := n.exec(who.chat, who.user, "other_user_preference.py")
		if code != 0 || strings.Contains(out, "sk-secret-of-U") ||
			!strings.Contains(out, "can only read the current user's preferences") {
			t.Fatalf("get_user_preference(\"U\") in %s as %q (exit %d): %q; want a refusal", who.chat, who.user, code, out)
		}
	}

	// The chat-scoped value stayed in group_A.
	if out, code := n.kv("get", "--chat", "group_A", "last_command"); code != 0 || out != "/weather London\n" {
		t.Fatalf("kv get group_A last_command = %q, exit %d", out, code)
	}
	if out, code := n.kv("get", "--chat", "group_B", "last_command"); code != 1 || out != "" {
		t.Fatalf("group_B sees group_A's last_command: %q, exit %d", out, code)
	}
	if out, _ := n.kv("get", "plugin_last_updated"); !strings.Contains(out, ".") {
		t.Fatalf("plugin_last_updated = %q", out)
	}

	// clear_cache deletes its own chat's cache and its own user's setting.
	for _, c := range [][]string{{"--chat", "group_A"}, {"--chat", "group_B"}} {
		if out, code := n.kv(append(c, "set", "session_cache_data", "cached")...); code != 0 || out != "created\n" {
			t.Fatalf("kv set %v: %q exit %d", c, out, code)
		}
	}
	n.kv("set", "--user", "U", "old_setting", "x")
	n.kv("set", "--user", "V", "old_setting", "x")
	n.want("group_A", "U", "clear_cache.py", "缓存已清除\n")
	if _, code := n.kv("get", "--chat", "group_A", "session_cache_data"); code != 1 {
		t.Fatal("clear_cache left group_A's cache")
	}
	if out, _ := n.kv("get", "--chat", "group_B", "session_cache_data"); out != "cached\n" {
		t.Fatalf("clear_cache in group_A touched group_B's cache: %q", out)
	}
	if _, code := n.kv("get", "--user", "U", "old_setting"); code != 1 {
		t.Fatal("clear_cache left U's old setting")
	}
	if out, _ := n.kv("get", "--user", "V", "old_setting"); out != "x\n" {
		t.Fatal("clear_cache as U deleted V's setting")
	}

	// Notes are U's, in every chat; V has none.
	n.want("group_A", "U", "add_note.py",
		"笔记 'Shopping' 已添加,ID: n1\n标题: Shopping\n内容: milk, eggs\n标签: home, urgent\n未找到 ID 为 'n2' 的笔记\n")
	n.want("group_B", "U", "get_note.py", "标题: Shopping\n内容: milk, eggs\n标签: home, urgent\n")
	n.want("group_A", "V", "get_note.py", "用户没有任何笔记\n")

	// Two runs adding notes at the same time, from two host processes:
	// Update keeps every note (the seeds' get-then-set would lose some).
	var wg sync.WaitGroup
	for _, prefix := range []string{"a", "b"} {
		f := filepath.Join(t.TempDir(), "prefix.txt")
		os.WriteFile(f, []byte(prefix), 0o644)
		wg.Go(func() {
			if out, code := n.exec("group_"+prefix, "U", "many_notes.py", "--upload", f); code != 0 || out != "done\n" {
				t.Errorf("many_notes %s: %q exit %d", prefix, out, code)
			}
		})
	}
	wg.Wait()
	n.want("group_B", "U", "check_notes.py", "missing: []\n")

	// A run without a user gets a clear error, not someone else's data.
	out, _ := n.exec("group_A", "", "no_user.py")
	if !strings.Contains(out, "without a user") {
		t.Fatalf("user-scoped call without a user: %q", out)
	}

	// migrate_data ran before the first run, and runs again on old data.
	if out, _ := n.kv("get", "data_version"); out != "2.0.0\n" {
		t.Fatalf("data_version = %q", out)
	}
	n.kv("set", "data_version", "1.5.0")
	n.want("group_A", "V", "get_preference.py", "偏好: {'theme': 'light', 'notifications': False}\n")
	if out, _ := n.kv("get", "data_version"); out != "2.0.0\n" {
		t.Fatalf("data_version after migration = %q", out)
	}

	// on_reset: `nekro chats reset` drops the chat's temp_cache only.
	n.kv("set", "--chat", "group_A", "temp_cache", "a")
	n.kv("set", "--chat", "group_B", "temp_cache", "b")
	r := testutil.RunNekroExamples(t, nil, "--data", n.data, "--plugins", plugin, "chats", "reset", "group_A")
	if r.Code != 0 {
		t.Fatalf("chats reset: exit %d: %s", r.Code, r.Stderr)
	}
	if _, code := n.kv("get", "--chat", "group_A", "temp_cache"); code != 1 {
		t.Fatal("on_reset left group_A's temp_cache")
	}
	if out, _ := n.kv("get", "--chat", "group_B", "temp_cache"); out != "b\n" {
		t.Fatalf("resetting group_A touched group_B: %q", out)
	}

	// The operator CLI: list a scope, delete, usage.
	if out, _ := n.kv("list", "--user", "U"); out != "all_notes\napi_key\npreferences\ntheme\n" {
		t.Fatalf("kv list --user U = %q", out)
	}
	if out, _ := n.kv("del", "--user", "U", "theme"); out != "deleted\n" {
		t.Fatalf("kv del = %q", out)
	}
	if out, _ := n.kv("del", "--user", "U", "theme"); out != "not found\n" {
		t.Fatalf("second kv del = %q", out)
	}
	n.want("group_B", "U", "get_user_preference.py", "未找到用户的主题偏好设置。\nNone\n")
	if out, code := n.kv("set", "--kv-max-value", "4", "big", "12345"); code == 0 || out != "" {
		t.Fatalf("kv set over --kv-max-value: %q exit %d", out, code)
	}
	// An operator forgets user U in every plugin; V's values stay.
	if out, code := n.kv("erase-user", "U"); code != 0 || !strings.HasPrefix(out, plugin+"\t") {
		t.Fatalf("kv erase-user U = %q exit %d", out, code)
	}
	if out, _ := n.kv("list", "--user", "U"); out != "" {
		t.Fatalf("user U still has values after erase-user: %q", out)
	}
	if out, _ := n.kv("list", "--user", "V"); out == "" {
		t.Fatal("erase-user U also erased user V")
	}
}
