// Package apptest opens what a test of one part needs through the
// composition root, so tests assemble nekro the way commands do.
package apptest

import (
	"context"
	"testing"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/runtime"
)

// OpenRuntime assembles an App on cfg.DataDir with cfg as its runtime
// configuration and returns the runtime; the App (database included) is
// closed when the test ends. Closing the runtime earlier is allowed.
func OpenRuntime(t testing.TB, cfg runtime.Config) (*runtime.Runtime, error) {
	t.Helper()
	a, err := Open(t, app.Config{DataDir: cfg.DataDir, Runtime: cfg, Log: cfg.Log})
	if err != nil {
		return nil, err
	}
	return a.Runtime, nil
}

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
