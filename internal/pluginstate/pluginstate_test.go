package pluginstate_test

import (
	"context"
	"testing"

	"github.com/nekro-go/nekro/internal/kv/kvtest"
	"github.com/nekro-go/nekro/internal/pluginstate"
)

// The operator's choices on both databases: a plugin without a row is on,
// a choice replaces the previous one, and a second store on the same
// database (another nekro process) reads it.
func TestChoicesAreSharedThroughTheDatabase(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			open := kvtest.DatabaseOpener(t, kind)
			a, err := pluginstate.Open(ctx, open())
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b, err := pluginstate.Open(ctx, open())
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if off, err := b.Disabled(ctx); err != nil || len(off) != 0 {
				t.Fatalf("fresh: %v %v", off, err)
			}
			for _, step := range []struct {
				key string
				on  bool
			}{{"a.x", false}, {"a.y", false}, {"a.x", true}} {
				if err := a.Set(ctx, step.key, step.on); err != nil {
					t.Fatal(err)
				}
			}
			off, err := b.Disabled(ctx)
			if err != nil || len(off) != 1 || !off["a.y"] {
				t.Errorf("disabled = %v, %v; want only a.y", off, err)
			}
		})
	}
}
