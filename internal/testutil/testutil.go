// Package testutil holds helpers shared by nekro's tests.
package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// DataDir returns a fresh data directory path that the sandbox user can
// reach. t.TempDir's parents are mode 0700, which bwrap, started as the
// unprivileged sandbox uid, cannot traverse to bind-mount a chat's
// directories; this one lives in a 0711 directory removed after the test.
func DataDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "nekro-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return filepath.Join(d, "data")
}
