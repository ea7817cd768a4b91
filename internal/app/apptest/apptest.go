// Package apptest opens what a test of one part needs through the
// composition root, so tests assemble nekro the way commands do.
package apptest

import (
	"context"
	"os"
	"testing"

	"github.com/nekro-go/nekro/internal/app"
)

// Open assembles an App closed when the test ends. With
// NEKRO_SANDBOX_TEMPLATE=1 in the test's environment, fresh bwrap
// sandboxes come from the shared template (as `nekro serve
// --sandbox-template`), so the same tests run against it.
func Open(t testing.TB, cfg app.Config) (*app.App, error) {
	t.Helper()
	if os.Getenv("NEKRO_SANDBOX_TEMPLATE") == "1" {
		cfg.Sandbox.Template = true
	}
	a, err := app.Open(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	return a, nil
}
