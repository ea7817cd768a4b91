package host_test

import (
	"context"
	"testing"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/app/apptest"
	"github.com/nekro-go/nekro/internal/host"
	"github.com/nekro-go/nekro/internal/testutil"
	"github.com/nekro-go/nekro/plugin"
)

// Plugins' cleanup hooks run when the host closes.
func TestCleanupHooksRunOnClose(t *testing.T) {
	p := plugin.New(plugin.Meta{ModuleName: "cleanup_probe", Author: "nekro"})
	cleaned := 0
	p.OnCleanup(func(context.Context) error { cleaned++; return nil })
	a, err := apptest.Open(t, app.Config{DataDir: testutil.DataDir(t), Host: host.Config{Plugins: []*plugin.Plugin{p}}})
	if err != nil {
		t.Fatal(err)
	}
	if cleaned != 0 {
		t.Fatal("cleanup ran before Close")
	}
	a.Host.Close(context.Background())
	if cleaned != 1 {
		t.Errorf("cleanup ran %d times on Close, want 1", cleaned)
	}
}
