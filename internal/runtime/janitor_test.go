package runtime_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	var logs syncBuffer
	rt, err := openRuntime(t, app.Config{DataDir: testutil.DataDir(t), Host: host.Config{Plugins: []*plugin.Plugin{testPlugin()}},
		Runtime: runtime.Config{SharedIdle: 800 * time.Millisecond, Log: slog.New(slog.NewTextHandler(&logs, nil))}})
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
	for {
		if _, err := os.Stat(old); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle sandbox's file still there: %s", old)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Emptied once: later sweeps (every 200 ms here) find nothing to
	// remove but the chat's packages, and say nothing.
	time.Sleep(2 * time.Second)
	if n := strings.Count(logs.String(), "chat=chat-a"); n != 1 {
		t.Errorf("chat-a's shared directory was emptied %d times, want once:\n%s", n, logs.String())
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
