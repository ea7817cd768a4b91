package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/host"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/testutil"
	"github.com/nekro-go/nekro/plugin"
)

// A sandbox's /app/shared is emptied once idle for Config.SharedIdle, and
// not while it is in use.
func TestIdleSharedDirectoriesAreEmptied(t *testing.T) {
	rt, err := openRuntime(t, app.Config{DataDir: testutil.DataDir(t), Host: host.Config{Plugins: []*plugin.Plugin{testPlugin()}},
		Runtime: runtime.Config{SharedIdle: 800 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	run(t, rt, `open("/app/shared/old.txt", "w").write("x")`)
	// chat-b keeps working: a run that lasts past the idle time sees its file.
	busy, err := rt.Exec(context.Background(), runtime.ExecRequest{ChatKey: "chat-b", Code: `
import time, os
open("/app/shared/mine.txt", "w").write("y")
time.sleep(1.5)
print(os.path.exists("/app/shared/mine.txt"))
`})
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(busy.Output) != "True" {
		t.Errorf("a file vanished during its run: %q", busy.Output)
	}
	deadline := time.Now().Add(5 * time.Second)
	old := filepath.Join(rt.Layout().SharedDir("sandbox_chat-a"), "old.txt")
	for time.Now().Before(deadline) {
		if _, err := os.Stat(old); os.IsNotExist(err) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("idle sandbox's file still there: %s", old)
}
