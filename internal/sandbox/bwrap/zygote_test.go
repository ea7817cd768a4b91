package bwrap_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/testutil"
)

// execAPI runs code in chat through nekro serve's API and returns the run.
func execAPI(t *testing.T, s *testutil.Served, chat, code string) (out string, stop string) {
	t.Helper()
	st, body := s.API("POST", "/api/chats/"+chat+"/exec", map[string]string{"code": code, "user_id": "u1"})
	if st != 200 {
		t.Fatalf("exec in %s: %d %s", chat, st, body)
	}
	var res struct {
		Output   string `json:"output"`
		StopType string `json:"stop_type"`
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		t.Fatal(err)
	}
	return res.Output, res.StopType
}

// fromZygote is the first line of every run below: whether numpy was
// loaded before the run's code imported anything, which only a zygote's
// preload does.
const fromZygote = "import sys as _s; print('ZYGOTE' if 'numpy' in _s.modules else 'FRESH')\n"

// warmUp runs code in chat until a run comes from the chat's zygote.
func warmUp(t *testing.T, s *testutil.Served, chat string) {
	t.Helper()
	for i := 0; i < 60; i++ {
		if out, _ := execAPI(t, s, chat, fromZygote); strings.HasPrefix(out, "ZYGOTE") {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("chat %s never got a zygote:\n%s", chat, s.Logs.String())
}

// mustZygote runs code (after fromZygote) and fails unless the zygote
// served it.
func mustZygote(t *testing.T, s *testutil.Served, chat, code string) string {
	t.Helper()
	var out, stop string
	for i := 0; i < 20; i++ {
		out, stop = execAPI(t, s, chat, fromZygote+code)
		if strings.HasPrefix(out, "ZYGOTE\n") {
			if stop != "NORMAL" {
				t.Fatalf("run ended %s: %s", stop, out)
			}
			return strings.TrimPrefix(out, "ZYGOTE\n")
		}
		time.Sleep(250 * time.Millisecond) // the next spare is still forking
	}
	t.Fatalf("runs in %s do not come from its zygote: %s", chat, out)
	return ""
}

// A run from the zygote changes what it can (module state of numpy,
// matplotlib and json, sys.modules, files in /tmp and /dev/shm, an open
// file, a thread, a background process, listening sockets): the next run
// of the same chat sees none of it, and starts alone in its own PID
// namespace with a fresh, empty /tmp.
func TestZygoteRunsSeeNothingOfEarlierRuns(t *testing.T) {
	s := testutil.Serve(t, testutil.DataDir(t), "tok")
	warmUp(t, s, "zc")
	first := mustZygote(t, s, "zc", `
import numpy as np, matplotlib, json, os, sys, threading, subprocess, socket, time
print('rand', np.random.randint(1 << 30))
np.set_printoptions(precision=2)
matplotlib.rcParams['lines.linewidth'] = 9
sys.modules['leaky'] = json
json.LEAK = 1
LEAKED_GLOBAL = 1
open('/tmp/leak.txt', 'w').write('x'); open('/dev/shm/leak', 'w').write('x')
held = open('/app/shared/held.txt', 'w')
threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
subprocess.Popen(['sleep', '30'], start_new_session=True)
a = socket.socket(socket.AF_UNIX); a.bind('\0leak'); a.listen()
b = socket.socket(); b.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); b.bind(('127.0.0.1', 5555)); b.listen()
print('polluted')
`)
	out := mustZygote(t, s, "zc", `
import numpy as np, matplotlib, json, os, sys, socket, threading
def refused(addr, family):
    try:
        socket.socket(family).connect(addr)
        return False
    except OSError:
        return True
print(json.dumps({
    "precision": np.get_printoptions()["precision"],
    "linewidth": matplotlib.rcParams["lines.linewidth"],
    "leaky": "leaky" in sys.modules, "LEAK": hasattr(json, "LEAK"), "global": "LEAKED_GLOBAL" in globals(),
    "tmp": sorted(os.listdir("/tmp")), "shm": sorted(os.listdir("/dev/shm")),
    "mpl": sorted(os.listdir("/tmp/.matplotlib")) if os.path.isdir("/tmp/.matplotlib") else [],
    "pids": sorted(p for p in os.listdir("/proc") if p.isdigit()),
    "fds": sorted(fd + " " + target for fd in os.listdir("/proc/self/fd") if int(fd) > 4
        for target in [os.path.realpath("/proc/self/fd/" + fd)] if os.path.exists("/proc/self/fd/" + fd)),
    "threads": threading.active_count(),
    "unix": refused("\0leak", socket.AF_UNIX), "tcp": refused(("127.0.0.1", 5555), socket.AF_INET),
    "rand": np.random.randint(1 << 30), "zygote_env": "OPENBLAS_NUM_THREADS" in os.environ,
}))
`)
	var got struct {
		Precision           int
		Linewidth           float64
		Leaky, LEAK, Global bool
		Tmp, Shm, Pids, Fds []string
		Mpl                 []string
		Threads             int
		Unix, TCP           bool
		Rand                int
		ZygoteEnv           bool `json:"zygote_env"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Precision != 8 || got.Linewidth == 9 || got.Leaky || got.LEAK || got.Global {
		t.Errorf("module state leaked into the next run: %s", out)
	}
	// /tmp holds nothing but matplotlib's font cache, which nekro gives
	// every sandbox (fonts.go).
	if len(got.Tmp) > 1 || len(got.Tmp) == 1 && got.Tmp[0] != ".matplotlib" || len(got.Shm) != 0 {
		t.Errorf("files leaked: /tmp %v, /dev/shm %v", got.Tmp, got.Shm)
	}
	for _, f := range got.Mpl {
		if !strings.HasPrefix(f, "fontlist-") {
			t.Errorf("files leaked: /tmp/.matplotlib %v", got.Mpl)
		}
	}
	if fmt.Sprint(got.Pids) != "[1]" || got.Threads != 1 {
		t.Errorf("processes or threads leaked, or others are visible: pids %v, threads %d", got.Pids, got.Threads)
	}
	// Beyond 0-2, the RPC socket (3) and the status pipe (4): files the
	// libraries keep open for reading (a chart's font), nothing of an
	// earlier run or the zygote (the listing's own is gone when listed).
	for _, fd := range got.Fds {
		if target := strings.SplitN(fd, " ", 2)[1]; !strings.HasPrefix(target, "/usr/") {
			t.Errorf("descriptor leaked into the run: %s (all: %v)", fd, got.Fds)
		}
	}
	if !got.Unix || !got.TCP {
		t.Errorf("a socket of the earlier run is reachable: %s", out)
	}
	// Each run draws its own numbers (the zygote reseeds numpy for each
	// spare), and sees the runs' environment, not the zygote's.
	if strings.Contains(first, fmt.Sprintf("rand %d\n", got.Rand)) {
		t.Errorf("two runs drew the same numpy random number %d: %s", got.Rand, first)
	}
	if got.ZygoteEnv {
		t.Errorf("the run sees the zygote's own environment (OPENBLAS_NUM_THREADS)")
	}
}

// A run cannot reach its zygote (no other process exists for it: kill,
// /proc/PID/root and the zygote's control socket are out of reach), holds
// no capability, and cannot see or reach another chat's zygote runs, even
// while one of them is running and listening.
func TestZygoteRunCannotReachZygoteOrOtherChats(t *testing.T) {
	s := testutil.Serve(t, testutil.DataDir(t), "tok")
	warmUp(t, s, "victim")
	warmUp(t, s, "thief")
	var wg sync.WaitGroup
	wg.Go(func() {
		mustZygote(t, s, "victim", `
import socket, time
open('/app/shared/secret.txt', 'w').write('victim-secret')
a = socket.socket(socket.AF_UNIX); a.bind('\0victim'); a.listen()
b = socket.socket(); b.bind(('127.0.0.1', 6000)); b.listen()
time.sleep(4)
`)
	})
	time.Sleep(1500 * time.Millisecond) // the victim's run is listening now
	out := mustZygote(t, s, "thief", `
import os, glob, socket, json, errno
killed = []
for pid in range(2, 4096):
    try:
        os.kill(pid, 0)
        killed.append(pid)
    except ProcessLookupError:
        pass
seen = []
for p in glob.glob('/proc/*/root/app/shared/*') + glob.glob('/proc/1/root/../*/app/shared/secret.txt'):
    seen.append(p)
def reach(addr, family):
    try:
        socket.socket(family).connect(addr)
        return True
    except OSError:
        return False
caps = [l for l in open('/proc/self/status') if l.startswith('Cap')]
try:
    os.unshare(os.CLONE_NEWUSER) if hasattr(os, 'unshare') else None
    userns = hasattr(os, 'unshare')
except OSError:
    userns = False
print(json.dumps({"signalable": killed, "seen": [p for p in seen if 'secret' in p],
    "own": os.listdir('/app/shared'), "unix": reach('\0victim', socket.AF_UNIX),
    "tcp": reach(('127.0.0.1', 6000), socket.AF_INET),
    "caps": sorted(set(l.split()[1] for l in caps))}))
`)
	wg.Wait()
	var got struct {
		Signalable []int
		Seen, Own  []string
		Unix, TCP  bool
		Caps       []string
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(got.Signalable) != 0 {
		t.Errorf("the run can signal pids %v (its zygote or other runs)", got.Signalable)
	}
	if len(got.Seen) != 0 || strings.Contains(strings.Join(got.Own, " "), "secret") {
		t.Errorf("the other chat's files are visible: %v, own %v", got.Seen, got.Own)
	}
	if got.Unix || got.TCP {
		t.Errorf("the other chat's sockets are reachable: %s", out)
	}
	if fmt.Sprint(got.Caps) != "[0000000000000000]" {
		t.Errorf("the run holds capabilities: %v", got.Caps)
	}
}

// A run's code can say "done" on the zygote's done pipe (descriptor 4)
// before it is: the run then ends there, with everything it started, and
// nothing of it goes on running (no time-out, no later write).
func TestZygoteRunThatClaimsToBeDoneEndsThere(t *testing.T) {
	s := testutil.Serve(t, testutil.DataDir(t), "tok")
	warmUp(t, s, "zd")
	var out, stop string
	for i := 0; i < 20; i++ {
		// A fresh sandbox has no descriptor 4: the write fails at once.
		out, stop = execAPI(t, s, "zd", fromZygote+`
import os, subprocess, time
subprocess.Popen(["/usr/bin/python3", "-c", "import time; time.sleep(3); open('/app/shared/late', 'w').write('x')"])
print("claiming", flush=True)
os.write(4, b"0\n")
time.sleep(600)
print("still running")
`)
		if strings.HasPrefix(out, "ZYGOTE\n") {
			break
		}
		time.Sleep(250 * time.Millisecond) // the next spare is still forking
	}
	if !strings.HasPrefix(out, "ZYGOTE\n") {
		t.Fatalf("runs in zd do not come from its zygote: %s", out)
	}
	if stop != "NORMAL" || strings.Contains(out, "still running") || strings.Contains(out, "time limit") {
		t.Fatalf("run ended %s: %s", stop, out)
	}
	time.Sleep(4 * time.Second)
	if got, _ := execAPI(t, s, "zd", `import os; print(os.path.exists('/app/shared/late'))`); strings.TrimSpace(got) != "False" {
		t.Fatalf("a process of the run kept running after it claimed to be done: %q", got)
	}
}

// A chat whose code draws charts gets spares that rehearse a chart once
// they have waited for code a while (its pages are then copied before the
// run's own chart), and nothing of the rehearsal shows: no figure is
// open, the run's first figure is number 1 and blank, and the run's own
// chart renders text in glyphs neither the zygote's nor the rehearsal's
// chart used, cleanly. A chat that never
// drew gets no rehearsal: its spare has copied far fewer pages when its
// run starts (counted as the run process's minor faults, which include
// the spare's, being the same process).
func TestZygoteSparesRehearseChartsForChatsThatDraw(t *testing.T) {
	s := testutil.Serve(t, testutil.DataDir(t), "tok")
	const probe = `
import resource, json
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
import matplotlib.pyplot as plt
state = {"faults": faults, "open": plt.get_fignums(), "number": plt.figure().number,
    "title": plt.gca().get_title(), "lines": len(plt.gca().lines)}
# Text with glyphs no earlier chart drew: FreeType reads them from the
# font file the zygote opened.
plt.title("The quick brown fox jumps over the lazy dog 0123456789 ÀÉÎÕÜ ßæø")
plt.plot([1, 2, 3])
plt.savefig("/app/shared/probe.png")
import os
state["png"] = os.path.getsize("/app/shared/probe.png")
print(json.dumps(state))
`
	measure := func(chat string) int {
		time.Sleep(1500 * time.Millisecond) // the spare has waited, as for a model's reply
		out, stop := execAPI(t, s, chat, fromZygote+probe)
		if !strings.HasPrefix(out, "ZYGOTE\n") || stop != "NORMAL" {
			t.Fatalf("the run in %s did not come from its zygote or failed (%s): %s", chat, stop, out)
		}
		var got struct {
			Faults, Number, Lines, PNG int
			Open                       []int
			Title                      string
		}
		// Anything but the one line (a font read failing, say) is an error.
		if err := json.Unmarshal([]byte(strings.TrimPrefix(out, "ZYGOTE\n")), &got); err != nil || got.PNG < 1000 {
			t.Fatalf("the chart in %s's run: %v: %.2000s", chat, err, out)
		}
		if len(got.Open) != 0 || got.Number != 1 || got.Title != "" || got.Lines != 0 {
			t.Errorf("a rehearsed chart shows in %s's run: %s", chat, out)
		}
		return got.Faults
	}
	for _, chat := range []string{"drawer", "plain"} {
		warmUp(t, s, chat)
	}
	mustZygote(t, s, "drawer", "import matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.savefig('/app/shared/c.png')")
	for _, chat := range []string{"drawer", "plain"} {
		// Use up the spares forked before the chart.
		mustZygote(t, s, chat, "pass")
		mustZygote(t, s, chat, "pass")
	}
	drew, plain := measure("drawer"), measure("plain")
	t.Logf("faults before the run: drawing chat %d, other %d", drew, plain)
	if drew-plain < 1500 {
		t.Errorf("the drawing chat's spare copied %d pages before its run, the other chat's %d: no chart rehearsed", drew, plain)
	}
}

// zygoteRun is the first line of the runs below: whether the run comes
// from a zygote (its __main__ is zygote.py), and whether numpy was loaded
// before its code imported anything. It names no heavy module itself.
const zygoteRun = "import sys as _s; print('ZYGOTE' if hasattr(_s.modules['__main__'], '_spare') else 'FRESH', ('num' + 'py') in _s.modules)\n"

// A chat's zygote imports only the heavy modules its chat's code named: a
// chat that never named numpy gets a zygote without it (an interpreter's
// start, not numpy's and matplotlib's imports), and once its code names
// numpy, its zygote is started again with numpy loaded.
func TestZygotePreloadsOnlyWhatItsChatUsed(t *testing.T) {
	s := testutil.Serve(t, testutil.DataDir(t), "tok")
	until := func(want string) {
		t.Helper()
		var out string
		// Generous: the zygote with numpy imports it first (~0.7 s of
		// CPU, seconds on a busy machine).
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
			if out, _ = execAPI(t, s, "light", zygoteRun); strings.HasPrefix(out, want) {
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
		t.Fatalf("runs in light never printed %q: last %q\n%s", want, out, s.Logs.String())
	}
	until("ZYGOTE False")
	if out, stop := execAPI(t, s, "light", "import numpy\nprint(numpy.arange(3).sum())"); stop != "NORMAL" || !strings.Contains(out, "3") {
		t.Fatalf("numpy in a zygote without it: %s %s", stop, out)
	}
	until("ZYGOTE True")
}

// matplotlib's font cache is built once and given to every sandbox: a
// fresh run's and a zygote spare's matplotlib (in a zygote that did not
// import it) use it instead of building their own (fc-list, every font).
func TestSandboxesShareMatplotlibFontCache(t *testing.T) {
	s := testutil.Serve(t, testutil.DataDir(t), "tok")
	// The module's name is built so that the chat's zygote does not
	// preload matplotlib: the spare's own import must find the cache.
	const probe = `
import importlib, logging, sys
logging.basicConfig(level=logging.DEBUG, stream=sys.stdout, format="%(message)s")
importlib.import_module("matplot" + "lib.font_manager")
`
	seen := map[string]bool{}
	deadline := time.Now().Add(3 * time.Minute) // the cache is built in the background (seconds on a busy machine)
	for time.Now().Before(deadline) && !(seen["FRESH"] && seen["ZYGOTE"]) {
		out, stop := execAPI(t, s, "fonts", zygoteRun+probe)
		if stop != "NORMAL" {
			t.Fatalf("run ended %s: %s", stop, out)
		}
		kind, _, _ := strings.Cut(out, " ")
		if strings.Contains(out, "Using fontManager instance from /tmp/.matplotlib/fontlist-") {
			seen[kind] = true
		} else if seen[kind] {
			// Once the cache exists every sandbox has it (a zygote
			// starts after it: the chat's first runs are fresh).
			t.Errorf("a %s run built its own font cache: %.3000s", kind, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !seen["FRESH"] || !seen["ZYGOTE"] {
		t.Fatalf("font cache used by: %v", seen)
	}
}
