package runtime_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/host"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/internal/testutil"
	"github.com/nekro-go/nekro/plugin"
)

// sandboxesOf counts the bwrap processes whose command line mentions dir.
func sandboxesOf(dir string) int {
	out, _ := exec.Command("pgrep", "-f", "bwrap.*"+dir).Output()
	return len(strings.Fields(string(out)))
}

func TestWarmSparesServeTheNextRunWithItsOwnIdentity(t *testing.T) {
	data := testutil.DataDir(t)
	rt, err := openRuntime(t, app.Config{DataDir: data, Host: host.Config{Plugins: []*plugin.Plugin{testPlugin()}},
		Runtime: runtime.Config{WarmSpares: true, Limits: sandbox.Limits{Timeout: 20 * time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	code := `
import os
w = whoami()
print(w["chat"], w["user"], os.path.exists("/tmp/left-behind"))
open("/tmp/left-behind", "w").write("x")
`
	for i, user := range []string{"alice", "bob", "carol"} {
		res, err := rt.Exec(context.Background(), runtime.ExecRequest{ChatKey: "warm", UserID: user, Code: code})
		if err != nil {
			t.Fatal(err)
		}
		// Each run has a fresh /tmp: nothing leaks from the previous run.
		if want := "warm " + user + " False"; strings.TrimSpace(res.Output) != want {
			t.Errorf("run %d: %q, want %q", i, res.Output, want)
		}
	}
	// A spare waits for the chat's next run...
	deadline := time.Now().Add(5 * time.Second)
	for sandboxesOf(data) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := sandboxesOf(data); n == 0 {
		t.Error("no warm sandbox after the runs")
	}
	// ...and is gone when the chat is reset or the runtime closes.
	rt.DiscardSpares("warm")
	// One may still be starting; it is discarded as soon as it is up.
	deadline = time.Now().Add(5 * time.Second)
	for sandboxesOf(data) != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := sandboxesOf(data); n != 0 {
		t.Errorf("%d sandboxes after DiscardSpares", n)
	}
	if _, err := rt.Exec(context.Background(), runtime.ExecRequest{ChatKey: "warm", Code: "pass"}); err != nil {
		t.Fatal(err)
	}
	rt.Close(context.Background())
	if n := sandboxesOf(data); n != 0 {
		t.Errorf("%d sandboxes left after Close", n)
	}
}
