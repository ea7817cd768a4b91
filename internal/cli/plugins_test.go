package cli_test

import (
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/testutil"
)

// --plugins enables only the plugins it names (and the built-in basic
// plugin); an unknown key is an error, not a silently empty runtime.
func TestPluginsFlagChoosesWhatTheCodeCanCall(t *testing.T) {
	data := testutil.DataDir(t)
	code := []byte("print(my_sum_function(1, 2))\nsend_msg_text(_ck, 'hi')")
	r := testutil.RunNekro(t, code, "--data", data, "--plugins", "nekro_examples.sandbox_methods", "exec", "--chat", "c", "-")
	if r.Code != 0 || r.Stdout != "3\n" || !strings.Contains(r.Stderr, "nekro: sent to chat c: hi") {
		t.Errorf("named plugin plus basic: %+v", r)
	}
	r = testutil.RunNekro(t, code, "--data", data, "--plugins", "nekro.basic", "exec", "--chat", "c", "-")
	if r.Code != 1 || !strings.Contains(r.Stdout, "NameError: name 'my_sum_function' is not defined") {
		t.Errorf("plugin left out is still callable: %+v", r)
	}
	r = testutil.RunNekro(t, code, "--data", data, "--plugins", "nope.missing", "exec", "--chat", "c", "-")
	if r.Code == 0 || !strings.Contains(r.Stderr, "unknown plugin nope.missing") {
		t.Errorf("unknown plugin key: %+v", r)
	}
}
