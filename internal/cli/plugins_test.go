package cli_test

import (
	"os"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/testutil"
)

// --plugins enables only the plugins it names (and the built-in basic
// plugin); an unknown key is an error, not a silently empty runtime.
func TestPluginsFlagChoosesWhatTheCodeCanCall(t *testing.T) {
	data := testutil.DataDir(t)
	code := []byte("print(my_sum_function(1, 2))\nsend_msg_text(_ck, 'hi')")
	r := testutil.RunNekroExamples(t, code, "--data", data, "--plugins", "nekro_examples.sandbox_methods", "exec", "--chat", "c", "-")
	if r.Code != 0 || r.Stdout != "3\n" || !strings.Contains(r.Stderr, "nekro: sent to chat c: hi") {
		t.Errorf("named plugin plus basic: %+v", r)
	}
	r = testutil.RunNekroExamples(t, code, "--data", data, "--plugins", "nekro.basic", "exec", "--chat", "c", "-")
	if r.Code != 1 || !strings.Contains(r.Stdout, "NameError: name 'my_sum_function' is not defined") {
		t.Errorf("plugin left out is still callable: %+v", r)
	}
	r = testutil.RunNekroExamples(t, code, "--data", data, "--plugins", "nope.missing", "exec", "--chat", "c", "-")
	if r.Code == 0 || !strings.Contains(r.Stderr, "unknown plugin nope.missing") {
		t.Errorf("unknown plugin key: %+v", r)
	}
}

// --kv-max-value reaches the store the plugins use.
func TestKVLimitFlag(t *testing.T) {
	data := testutil.DataDir(t)
	code := []byte(`
try:
    add_note("n1", "t", "x" * 300)
    print("stored")
except PluginError as e:
    print("refused:", e)
`)
	r := testutil.RunNekroExamples(t, code, "--data", data, "--plugins", "nekro_examples.kvstore", "--kv-max-value", "200", "exec", "--chat", "c", "--user", "u", "-")
	if !strings.Contains(r.Stdout, "refused:") || !strings.Contains(r.Stdout, "over the limit of 200 bytes") {
		t.Errorf("a 300-byte note under a 200-byte cap: %+v", r)
	}
	r = testutil.RunNekroExamples(t, code, "--data", data, "--plugins", "nekro_examples.kvstore", "exec", "--chat", "c", "--user", "u", "-")
	if strings.TrimSpace(r.Stdout) != "stored" {
		t.Errorf("the same note under the default cap: %+v", r)
	}
}

// `nekro plugins` only lists: it opens no database, runs no plugin hook
// and leaves no data directory behind.
func TestPluginsListingTouchesNoData(t *testing.T) {
	data := testutil.DataDir(t)
	r := testutil.RunNekro(t, nil, "--data", data, "plugins")
	if r.Code != 0 || !strings.Contains(r.Stdout, "nekro.basic") {
		t.Fatalf("plugins: %+v", r)
	}
	if _, err := os.Stat(data); err == nil {
		t.Errorf("nekro plugins created the data directory %s", data)
	}
}
