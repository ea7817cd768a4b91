package pyplugin_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/testutil"
)

// execIn runs code with `nekro exec` and the plugins of dir, in chat.
func execIn(t *testing.T, dir, chat, code string) testutil.Result {
	t.Helper()
	return testutil.RunNekro(t, []byte(code), "exec", "--data", testutil.DataDir(t), "--plugin-dir", dir,
		"--chat", chat, "--user", "u1", "-")
}

// A plugin written to the reference's API as real plugins use it loads
// and answers: the re-export paths, core.logger and core.config, i18n,
// MsgSignal at schemas.signal, AgentCtx's platform fields derived from
// the chat key, the run's own chat as a DBChatChannel row (and no
// other), its stored messages (TestDBChatMessage), a clear error for
// what nekro does not give (Qdrant), and a mounted command that loads (internal/server's
// TestPythonPluginCommands runs commands).
func TestRealPluginSurface(t *testing.T) {
	r := execIn(t, "testdata/surface", "onebot_v11-group_123", "print(where_am_i())\nprint(use_qdrant())\n")
	if r.Code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	for _, w := range []string{
		"'adapter_key': 'onebot_v11'", "'channel_id': 'group_123'", "'channel_type': 'group'",
		"'chat_key': 'onebot_v11-group_123'", "'from_user_id': 'u1'", "'group': True",
		"'visible_chats': ['onebot_v11-group_123']", "'history': 'answered'", "'context_len': 24",
		"'greeting': 'hi'", "'signal': 'CONTINUE'", "'name_en': 'Surface'", "'commands': ['surf']",
		"NotAvailableError: get_qdrant_client is not available in nekro: nekro has no vector database",
	} {
		if !strings.Contains(r.Stdout, w) {
			t.Errorf("output lacks %q:\n%s", w, r.Stdout)
		}
	}
	if strings.Contains(r.Stderr, "declares commands") {
		t.Errorf("the mounted command, served now, is said to be unserved:\n%s", r.Stderr)
	}
	if !strings.Contains(r.Stderr, "where_am_i in onebot_v11-group_123") {
		t.Errorf("core.logger's loguru-style record did not reach nekro's log:\n%s", r.Stderr)
	}
	// A chat of no platform has no adapter; its channel is the key.
	r = execIn(t, "testdata/surface", "group_9", "d = where_am_i()\nprint(d['adapter_key'], d['channel_id'], d['channel_type'])\n")
	if r.Code != 0 || !strings.Contains(r.Stdout, "None group_9 group") {
		t.Errorf("nekro's own chat: %+v", r)
	}
}

// A plugin's coroutine runs as an asyncio Task: httpx (anyio) makes a
// request to a local server, asyncio.current_task() is set and
// asyncio.timeout() works.
func TestPluginCoroutineIsATask(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import httpx").Run(); err != nil {
		t.Skip("python3-httpx is not installed (scripts/deps.sh test installs it)")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "pong")
	}))
	defer srv.Close()
	r := execIn(t, "testdata/surface", "c1", fmt.Sprintf("print(fetch(%q))\n", srv.URL))
	if r.Code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	for _, w := range []string{"'status': 200", "'body': 'pong'", "'in_task': True", "'timeout_works': True"} {
		if !strings.Contains(r.Stdout, w) {
			t.Errorf("output lacks %q:\n%s", w, r.Stdout)
		}
	}
}

// A plugin that fails to load is listed by `nekro plugins` with the file
// and line its import failed at and the exception, the others are
// listed as loaded, and the command exits non-zero.
func TestBrokenPluginListed(t *testing.T) {
	r := testutil.RunNekro(t, nil, "plugins", "--data", testutil.DataDir(t), "--plugin-dir", "testdata/failing")
	if r.Code == 0 {
		t.Fatalf("nekro plugins exited 0 with a plugin that did not load:\n%s", r.Stdout)
	}
	if !strings.Contains(r.Stdout, "tester.fine") {
		t.Errorf("the plugin that loads is not listed:\n%s", r.Stdout)
	}
	i := strings.Index(r.Stdout, "not loaded (1):")
	if i < 0 {
		t.Fatalf("no list of plugins not loaded:\n%s", r.Stdout)
	}
	failed := r.Stdout[i:]
	for _, w := range []string{"needs_missing.py:5:", "ModuleNotFoundError", "nekro_agent.api.no_such_module"} {
		if !strings.Contains(failed, w) {
			t.Errorf("the failure lacks %q:\n%s", w, failed)
		}
	}
}

// DBChatMessage answers from the chat's stored messages, the call's own
// chat only: a filter without a chat key sees it, a filter naming another
// chat (which has messages) finds none.
func TestDBChatMessage(t *testing.T) {
	data := testutil.DataDir(t)
	run := func(chat, code string) testutil.Result {
		r := testutil.RunNekro(t, []byte(code), "exec", "--data", data, "--plugin-dir", "testdata/surface", "--chat", chat, "-")
		if r.Code != 0 {
			t.Fatalf("exec in %s: %+v", chat, r)
		}
		return r
	}
	run("onebot_v11-group_999", "note('elsewhere')\n")
	r := run("onebot_v11-group_123", "note('one')\nnote('two')\nnote('three')\nprint(messages('onebot_v11-group_999'))\n")
	want := "{'newest': [['three', '-1', 'onebot_v11-group_123', 'group'], ['two', '-1', 'onebot_v11-group_123', 'group']], " +
		"'unfiltered': ['one', 'two', 'three'], 'since': 3, 'other': 0}"
	if !strings.Contains(r.Stdout, want) {
		t.Errorf("output lacks %s:\n%s", want, r.Stdout)
	}
}

// recurring_timer's jobs are timers of nekro's timer system, kept in its
// database: created, paused, updated (cron, workday mode), listed,
// summarised, resumed and deleted from a call; another chat's and the
// holiday-calendar modes are refused.
func TestRecurringTimerJobs(t *testing.T) {
	r := execIn(t, "testdata/surface", "onebot_v11-group_123", "print(cron_demo('onebot_v11-group_999'))\n")
	want := "{'title': 'News', 'desc': 'morning news', 'status': ['active', 'paused', 'paused', 'active'], " +
		"'cron': '0 9 * * 1-5', 'mode': 'mon_fri', 'tz': 'Asia/Shanghai', 'listed': [True], 'summary': [1, 0, 0, 0], " +
		"'next_hour': 1, 'elsewhere': 'HostError', 'cn': 'NotAvailableError', 'after': 0}"
	if r.Code != 0 || !strings.Contains(r.Stdout, want) {
		t.Errorf("want %s:\n%+v", want, r)
	}
}
