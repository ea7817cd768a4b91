package pyplugin_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/pyplugin"
)

// BenchmarkPythonMethodCall is one call from nekro to a Python plugin's
// method and back, without the sandbox's leg (bench spine measures the
// whole path against a Go method's).
func BenchmarkPythonMethodCall(b *testing.B) {
	set, err := pyplugin.Load(context.Background(), pyplugin.Options{Dirs: []string{pluginDir}, CacheDir: b.TempDir(),
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer set.Close()
	var m *pluginhost.MethodInfo
	for _, p := range set.Plugins {
		for _, mi := range pluginhost.Methods(p) {
			if mi.Name == "slow" {
				m = mi
			}
		}
	}
	ctx := pluginhost.NewCtx(context.Background(), m.Plugin(), &pluginhost.RunEnv{})
	args := map[string]json.RawMessage{"seconds": json.RawMessage("0")}
	b.ResetTimer()
	for b.Loop() {
		if _, err := pluginhost.Call(m, ctx, args); err != nil {
			b.Fatal(err)
		}
	}
}
