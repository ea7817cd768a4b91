// Package apptest opens what a test of one part needs through the
// composition root, so tests assemble nekro the way commands do.
package apptest

import (
	"context"
	"testing"

	"github.com/nekro-go/nekro/internal/app"
)

// Open assembles an App closed when the test ends.
func Open(t testing.TB, cfg app.Config) (*app.App, error) {
	t.Helper()
	a, err := app.Open(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	return a, nil
}
