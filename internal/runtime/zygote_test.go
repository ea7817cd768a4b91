package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/host"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/internal/sandbox/bwrap"
	"github.com/nekro-go/nekro/internal/testutil"
	"github.com/nekro-go/nekro/plugin"
)

const zygoteMark = "import sys as _s; print('ZYGOTE' if 'numpy' in _s.modules else 'FRESH')\n"

// zygoteRun runs code until a run of it comes from the chat's zygote.
func zygoteRun(t *testing.T, rt testRuntime, code string) *runtime.ExecResult {
	t.Helper()
	for i := 0; i < 80; i++ {
		res, err := rt.Exec(context.Background(), runtime.ExecRequest{ChatKey: "zy", UserID: "u", Code: zygoteMark + code})
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(res.Output, "ZYGOTE") {
			return res
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatal("no run came from a zygote")
	return nil
}

// Runs from a zygote behave as fresh runs do: method calls, exit codes
// (os._exit's too), the time limit (the whole run killed), the output cap;
// and when the zygote dies, the chat's runs go on in fresh sandboxes.
func TestZygoteRunsBehaveAsFreshRuns(t *testing.T) {
	rt, err := openRuntime(t, app.Config{DataDir: testutil.DataDir(t), Sandbox: app.SandboxConfig{Zygotes: 2},
		Host: host.Config{Plugins: []*plugin.Plugin{testPlugin()}},
		Runtime: runtime.Config{WarmSpares: true,
			Limits: sandbox.Limits{Timeout: 3 * time.Second, OutputBytes: 4096}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	if res := zygoteRun(t, rt, "print(add(2, 3))"); res.StopType != sandbox.Normal || !strings.Contains(res.Output, "5") {
		t.Errorf("call: %s %q", res.StopType, res.Output)
	}
	if res := zygoteRun(t, rt, "raise SystemExit(3)"); res.StopType != sandbox.Error || res.ExitCode != 3 {
		t.Errorf("exit: %s %d %q", res.StopType, res.ExitCode, res.Output)
	}
	// os._exit skips the run's own report: the zygote's reaper tells it.
	if res := zygoteRun(t, rt, "import os, sys\nsys.stdout.flush()\nos._exit(7)"); res.StopType != sandbox.Error || res.ExitCode != 7 {
		t.Errorf("os._exit: %s %d %q", res.StopType, res.ExitCode, res.Output)
	}
	if res := zygoteRun(t, rt, "1/0"); res.StopType != sandbox.Error || !strings.Contains(res.Output, "ZeroDivisionError") {
		t.Errorf("error: %s %q", res.StopType, res.Output)
	}
	res := zygoteRun(t, rt, "import subprocess, time\nsubprocess.Popen(['sleep', '100'])\nprint('started', flush=True)\ntime.sleep(100)")
	if res.StopType != sandbox.Timeout || !strings.Contains(res.Output, "started") {
		t.Errorf("timeout: %s %q", res.StopType, res.Output)
	}
	if res := zygoteRun(t, rt, "print('x' * 100000)"); !strings.Contains(res.Output, "bytes of output cut") {
		t.Errorf("output not capped: %d bytes", len(res.Output))
	}
	// Kill the zygote: the next runs still work, from fresh sandboxes
	// until a new zygote is up.
	killed := 0
	for _, pid := range zygotePids(t) {
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	if killed == 0 {
		t.Fatal("no zygote process found")
	}
	// Once the host has seen it die (a zygote killed at the very moment a
	// run is handed over takes that run with it, as a killed sandbox would).
	b := rt.Runner().(*bwrap.Runner)
	for i := 0; i < 100 && len(b.ZygoteStats()) > 0; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	for i := 0; i < 3; i++ {
		res, err := rt.Exec(context.Background(), runtime.ExecRequest{ChatKey: "zy", UserID: "u", Code: "print(add(1, 1))"})
		if err != nil || res.StopType != sandbox.Normal || !strings.Contains(res.Output, "2") {
			t.Fatalf("run after the zygote died: %v %+v", err, res)
		}
	}
}

// zygotePids lists this process's descendants running zygote.py.
func zygotePids(t *testing.T) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(cmd), "/app/.nekro/zygote.py") && descendsFrom(pid, os.Getpid()) {
			out = append(out, pid)
		}
	}
	return out
}

func descendsFrom(pid, ancestor int) bool {
	for pid > 1 {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			return false
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 {
			return false
		}
		pid, _ = strconv.Atoi(f[1])
		if pid == ancestor {
			return true
		}
	}
	return false
}
