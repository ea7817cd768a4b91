package pyplugin_test

import (
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/testutil"
)

// A Python plugin that mounts the method name of a built-in port
// (nekro.dice's dice_roll) replaces the port: `nekro plugins` lists it,
// says the port is off and why, and exits 0 (a stated rule, not a
// failure).
func TestInstalledPluginReplacesTheBuiltinPort(t *testing.T) {
	r := testutil.RunNekro(t, nil, "plugins", "--data", testutil.DataDir(t), "--plugin-dir", "testdata/clash")
	if r.Code != 0 {
		t.Fatalf("nekro plugins: %+v", r)
	}
	if !strings.Contains(r.Stdout, "tester.dicey") || !strings.Contains(r.Stdout, "COMMAND") {
		t.Errorf("the installed plugin (and its command) is not listed:\n%s", r.Stdout)
	}
	i := strings.Index(r.Stdout, "replaced (1):\n  nekro.dice: off, replaced by tester.dicey (same method dice_roll)\n")
	if i < 0 {
		t.Fatalf("no statement that nekro.dice is replaced:\n%s", r.Stdout)
	}
	if strings.Contains(r.Stdout[:i], "nekro.dice ") {
		t.Errorf("nekro.dice is listed as enabled:\n%s", r.Stdout)
	}
}
