package runtime_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
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

// sandboxesOf counts the bwrap processes whose command line mentions dir,
// and (with NEKRO_SANDBOX_TEMPLATE=1) the sandbox template's children
// whose /app/shared is a chat directory beneath dir: their command line
// is the template's and names no chat.
func sandboxesOf(dir string) int {
	out, _ := exec.Command("pgrep", "-f", "bwrap.*"+dir).Output()
	n := len(strings.Fields(string(out)))
	out, _ = exec.Command("pgrep", "-f", "python3 -I -S -B -u /proc/self/fd/5").Output()
	chats, _ := filepath.Glob(filepath.Join(dir, "sandboxes", "*"))
	for _, pid := range strings.Fields(string(out)) {
		st, err := os.Stat("/proc/" + pid + "/root/app/shared")
		if err != nil {
			continue // the template itself, or a child not yet in its root
		}
		for _, c := range chats {
			if cs, err := os.Stat(c); err == nil && os.SameFile(st, cs) {
				n++
				break
			}
		}
	}
	return n
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

// A run in a warm spare is named by the time it starts, not by the time
// its sandbox was made: the run log sorts and reads runs by their ids.
func TestRunInAWarmSpareIsNamedWhenItStarts(t *testing.T) {
	data := testutil.DataDir(t)
	rt, err := openRuntime(t, app.Config{DataDir: data, Host: host.Config{Plugins: []*plugin.Plugin{testPlugin()}},
		Runtime: runtime.Config{WarmSpares: true, Limits: sandbox.Limits{Timeout: 20 * time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	if _, err := rt.Exec(context.Background(), runtime.ExecRequest{ChatKey: "named", Code: "pass"}); err != nil {
		t.Fatal(err)
	}
	// The spare for the next run is up...
	deadline := time.Now().Add(60 * time.Second)
	for sandboxesOf(data) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if sandboxesOf(data) == 0 {
		t.Fatal("no warm sandbox after the first run")
	}
	// ...and waits past the second the id would carry if it were named
	// when made.
	time.Sleep(2100 * time.Millisecond)
	asked := time.Now().UTC().Truncate(time.Second)
	res, err := rt.Exec(context.Background(), runtime.ExecRequest{ChatKey: "named", Code: `print(run_id())`})
	if err != nil {
		t.Fatal(err)
	}
	stamp, _, _ := strings.Cut(res.RunID, "-")
	at, err := time.Parse("20060102T150405", stamp)
	if err != nil {
		t.Fatalf("run id %q: %v", res.RunID, err)
	}
	if at.Before(asked) {
		t.Errorf("run id %s carries %s, before the run was asked for at %s", res.RunID, at, asked)
	}
	if got := strings.TrimSpace(res.Output); got != res.RunID {
		t.Errorf("the run's plugins see run id %q, the result says %q", got, res.RunID)
	}
}

// A prewarmed run (the agent's: Prewarm while the model writes, then the
// run) takes the sandbox Prewarm started, and no spare is started after
// it: once the run is done no sandbox of the chat is left.
func TestPrewarmedRunLeavesNoSpare(t *testing.T) {
	data := testutil.DataDir(t)
	rt, err := openRuntime(t, app.Config{DataDir: data, Host: host.Config{Plugins: []*plugin.Plugin{testPlugin()}},
		Runtime: runtime.Config{WarmSpares: true, Limits: sandbox.Limits{Timeout: 20 * time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	rt.host.Prewarm("pw", sandbox.Limits{}, nil, time.Time{}) // as the agent does, through the host
	deadline := time.Now().Add(30 * time.Second)
	for sandboxesOf(data) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := sandboxesOf(data); n != 1 {
		t.Fatalf("%d sandboxes after Prewarm, want 1", n)
	}
	res, err := rt.Exec(context.Background(), runtime.ExecRequest{ChatKey: "pw", Code: "print('ran')", Prewarmed: true})
	if err != nil || strings.TrimSpace(res.Output) != "ran" {
		t.Fatalf("run: %v %+v", err, res)
	}
	deadline = time.Now().Add(30 * time.Second)
	for sandboxesOf(data) != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	// A spare after the run would be up well within this second.
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if n := sandboxesOf(data); n != 0 {
			t.Fatalf("%d sandboxes of the chat after a prewarmed run, want none", n)
		}
	}
}

// A prewarmed run that comes at once (a model faster than the sandbox's
// start) finds its sandbox starting and waits for it, even with the pool
// of idle spares full (the prewarm makes room: a run is coming, where an
// idle spare's may never come): it neither starts a second sandbox
// itself nor leaves the prewarmed one unused, and the pool stays within
// its bound.
func TestPrewarmedRunThatComesAtOnceTakesItsSandbox(t *testing.T) {
	rt, err := openRuntime(t, app.Config{DataDir: testutil.DataDir(t), Host: host.Config{Plugins: []*plugin.Plugin{testPlugin()}},
		Runtime: runtime.Config{WarmSpares: true, MaxSpares: 1, Limits: sandbox.Limits{Timeout: 20 * time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	rt.host.Prewarm("other", sandbox.Limits{}, nil, time.Time{}) // fills the pool
	deadline := time.Now().Add(30 * time.Second)
	for rt.WarmSpares() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the other chat's spare did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := range 3 {
		chat := fmt.Sprintf("now-%d", i)
		rt.host.Prewarm(chat, sandbox.Limits{}, nil, time.Time{})
		res, err := rt.Exec(context.Background(), runtime.ExecRequest{ChatKey: chat, Code: "print('ran')", Prewarmed: true})
		if err != nil || strings.TrimSpace(res.Output) != "ran" {
			t.Fatalf("run: %v %+v", err, res)
		}
	}
	if n := runtime.ColdRuns(rt.Runtime); n != 0 {
		t.Errorf("%d of 3 prewarmed runs started a sandbox of their own", n)
	}
	if n := rt.WarmSpares(); n > 1 {
		t.Errorf("%d spares after the runs, want at most the pool's bound, 1", n)
	}
}

// A chat that runs again and again (three runs in a row) gets a spare
// after its prewarmed runs too: with a model faster than a sandbox's
// start, every turn would otherwise wait for the sandbox its prewarm
// only just started.
func TestActiveChatKeepsASpareAfterPrewarmedRuns(t *testing.T) {
	rt, err := openRuntime(t, app.Config{DataDir: testutil.DataDir(t), Host: host.Config{Plugins: []*plugin.Plugin{testPlugin()}},
		Runtime: runtime.Config{WarmSpares: true, Limits: sandbox.Limits{Timeout: 20 * time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		rt.host.Prewarm("busy", sandbox.Limits{}, nil, time.Time{})
		res, err := rt.Exec(context.Background(), runtime.ExecRequest{ChatKey: "busy", Code: "print('ran')", Prewarmed: true})
		if err != nil || strings.TrimSpace(res.Output) != "ran" {
			t.Fatalf("run %d: %v %+v", i+1, err, res)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for rt.WarmSpares() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d spares waiting after the active chat's third prewarmed run, want 1", rt.WarmSpares())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// More chats prewarm at once than sandboxes start at once (two per core):
// the others wait their turn, and every chat gets its sandbox and runs in
// it.
func TestManyPrewarmsAllStartInTurn(t *testing.T) {
	rt, err := openRuntime(t, app.Config{DataDir: testutil.DataDir(t), Host: host.Config{Plugins: []*plugin.Plugin{testPlugin()}},
		Runtime: runtime.Config{WarmSpares: true, Limits: sandbox.Limits{Timeout: 20 * time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	n := min(2*goruntime.NumCPU()+3, 12)
	for i := range n {
		rt.host.Prewarm(fmt.Sprintf("many-%d", i), sandbox.Limits{}, nil, time.Time{})
	}
	deadline := time.Now().Add(2 * time.Minute)
	for rt.WarmSpares() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d prewarmed sandboxes started", rt.WarmSpares(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := range n {
		res, err := rt.Exec(context.Background(), runtime.ExecRequest{ChatKey: fmt.Sprintf("many-%d", i), Code: "print('ran')", Prewarmed: true})
		if err != nil || strings.TrimSpace(res.Output) != "ran" {
			t.Fatalf("chat %d: %v %+v", i, err, res)
		}
	}
	if s := rt.WarmSpares(); s != 0 {
		t.Errorf("%d spares left after every prewarmed run", s)
	}
}
