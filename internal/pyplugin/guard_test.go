package pyplugin_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/testutil"
)

const guardDir = "testdata/guarded"

// execGuard runs code in chat with the guard plugin through `nekro exec`.
func execGuard(t *testing.T, data, chat, code string, flags ...string) testutil.Result {
	t.Helper()
	args := append([]string{"exec", "--data", data, "--plugin-dir", guardDir, "--chat", chat, "--user", "u1"}, flags...)
	return testutil.RunNekro(t, []byte(code), append(args, "-")...)
}

// hostSecret writes a file only root can read, outside the data
// directory, and returns its path.
func hostSecret(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Sandbox code flips /app/shared/x between a file and a symlink to a host
// secret while a Python plugin reads _ctx.fs.get_file(x).read_text(),
// thousands of times: the plugin reads the file or refuses the symlink,
// and the secret never comes back.
func TestPythonPluginFileAPIWithstandsASymlinkRace(t *testing.T) {
	secret := hostSecret(t, "HOST-SECRET-7f3a")
	data := testutil.DataDir(t)
	r := execGuard(t, data, "race", fmt.Sprintf(`
import os, threading, time
os.chdir("/app/shared")
with open("x", "w") as f:
    f.write("harmless")
stop = False
def flip():
    while not stop:
        os.symlink(%q, "l.tmp")
        os.replace("l.tmp", "x")
        with open("f.tmp", "w") as f:
            f.write("harmless")
        os.replace("f.tmp", "x")
t = threading.Thread(target=flip)
t.start()
n = leaked = read = refused = 0
errors = set()
t0 = time.time()
while time.time() - t0 < 5 and n < 4000:
    n += 1
    try:
        s = read_shared("/app/shared/x")
        if "HOST-SECRET" in s:
            leaked += 1
        else:
            read += 1
    except Exception as e:
        refused += 1
        errors.add(str(e)[:120])
stop = True
t.join()
print("TRIES", n, "LEAKED", leaked, "READ", read, "REFUSED", refused)
for e in sorted(errors)[:5]:
    print("ERROR", e)
`, secret), "--call-timeout", "20s")
	if r.Code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	m := regexp.MustCompile(`TRIES (\d+) LEAKED (\d+) READ (\d+) REFUSED (\d+)`).FindStringSubmatch(r.Stdout)
	if m == nil {
		t.Fatalf("no tally:\n%s\n%s", r.Stdout, r.Stderr)
	}
	t.Logf("%s", r.Stdout)
	if m[2] != "0" || strings.Contains(r.Stdout+r.Stderr, "HOST-SECRET") {
		t.Fatalf("the host secret reached the sandbox %s times in %s tries", m[2], m[1])
	}
	if n, _ := strconv.Atoi(m[3]); n == 0 {
		t.Errorf("the plugin never read the regular file: the test did not race")
	}
	// The calls' private copies are gone with the plugin's process.
	if ents, err := os.ReadDir(filepath.Join(data, "python", "tmp")); err != nil || len(ents) != 0 {
		t.Errorf("the plugin's temporary directory was not cleaned up: %v %v", ents, err)
	}
}

// A plugin writing fs.shared_path / name where the sandbox planted a
// symlink named name (to a host file) or a symlinked directory does not
// write the host file: the sandbox gets the plugin's file, or the call
// fails saying why.
func TestPythonPluginWritesDoNotFollowPlantedSymlinks(t *testing.T) {
	target := filepath.Join(t.TempDir(), "target.txt")
	if err := os.WriteFile(target, []byte("original"), 0o600); err != nil {
		t.Fatal(err)
	}
	hostDir := t.TempDir()
	data := testutil.DataDir(t)
	r := execGuard(t, data, "writer", fmt.Sprintf(`
import os
os.symlink(%q, "/app/shared/out")
os.symlink(%q, "/app/shared/d")
print("WRITE", write_shared("out", "pwned"))
print("SEES", os.path.islink("/app/shared/out"), open("/app/shared/out").read())
try:
    print("DIR", write_shared("d/f", "pwned"))
except Exception as e:
    print("DIR refused:", type(e).__name__, e)
print("NEW", write_shared("sub/new.txt", "fresh"), open("/app/shared/sub/new.txt").read())
with open("/app/shared/sub/new.txt", "a") as f:  # the chat's own file, not nekro's
    f.write(" and changed")
print("CHANGED", open("/app/shared/sub/new.txt").read())
`, target, hostDir))
	if r.Code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	t.Logf("%s", r.Stdout)
	if b, _ := os.ReadFile(target); string(b) != "original" {
		t.Errorf("the host file behind the planted symlink now holds %q", b)
	}
	if ents, _ := os.ReadDir(hostDir); len(ents) != 0 {
		t.Errorf("the plugin wrote into the host directory behind a planted symlink: %v", ents)
	}
	for _, w := range []string{"WRITE written", "SEES False pwned", "DIR refused: PluginError", "symlink", "NEW written fresh",
		"CHANGED fresh and changed"} {
		if !strings.Contains(r.Stdout, w) {
			t.Errorf("output lacks %q:\n%s\n%s", w, r.Stdout, r.Stderr)
		}
	}
}

// A hand-made request nested 5000 deep is refused with a clear error
// before it reaches the plugin; a line the Python host cannot decode (bad
// UTF-8) is answered too; and the plugin's process serves the next call
// without having restarted.
func TestHostileRequestLinesDoNotKillThePythonPlugin(t *testing.T) {
	data := testutil.DataDir(t)
	r := execGuard(t, data, "deep", `
import api_caller, time
before = guard_pid()
s = api_caller._connect()
f = s.makefile("rb")
deep = "[" * 5000 + "]" * 5000
t0 = time.time()
s.sendall(('{"id":1,"method":"echo_value","args":{"value":%s}}\n' % deep).encode())
print("DEEP", f.readline().decode().strip())
s.sendall(b'{"id":2,"method":"echo_value","args":{"value":"a\xffb"}}\n')
print("UTF8", f.readline().decode().strip())
print("SECONDS %.1f" % (time.time() - t0))
print("ECHO", echo_value([1, [2, [3]]]))
print("SAME", guard_pid() == before)
`, "--call-timeout", "15s")
	if r.Code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	t.Logf("%s", r.Stdout)
	var deep struct {
		ID    int `json:"id"`
		Error struct{ Type, Message string }
	}
	line := regexp.MustCompile(`DEEP (.*)`).FindStringSubmatch(r.Stdout)
	if line == nil || json.Unmarshal([]byte(line[1]), &deep) != nil || deep.ID != 1 || deep.Error.Type != "bad_request" ||
		!strings.Contains(deep.Error.Message, "nested") {
		t.Errorf("the deep request got no clear error:\n%s", r.Stdout)
	}
	if !strings.Contains(r.Stdout, "UTF8 {\"id\":2,\"result\":\"str 'a\ufffdb'\"}") {
		t.Errorf("the bad UTF-8 line was not answered:\n%s", r.Stdout)
	}
	if m := regexp.MustCompile(`SECONDS (\d+\.\d)`).FindStringSubmatch(r.Stdout); m == nil {
		t.Errorf("no timing:\n%s", r.Stdout)
	} else if s, _ := strconv.ParseFloat(m[1], 64); s > 10 {
		t.Errorf("the hostile lines took %.1f s to be answered", s)
	}
	for _, w := range []string{"ECHO list [1, [2, [3]]]", "SAME True"} {
		if !strings.Contains(r.Stdout, w) {
			t.Errorf("output lacks %q:\n%s\n%s", w, r.Stdout, r.Stderr)
		}
	}
}

// One chat that crashes a Python plugin over and over pays for it: its
// calls are refused for a while, saying why and until when, and the
// operator's log names it; another chat's calls, meanwhile and right
// after, keep being served promptly.
func TestOneChatsCrashLoopDoesNotDenyThePluginToOthers(t *testing.T) {
	abs, err := filepath.Abs(guardDir)
	if err != nil {
		t.Fatal(err)
	}
	data := testutil.DataDir(t)
	srv := testutil.Serve(t, data, "tok", "NEKRO_PLUGIN_DIR="+abs)
	exec := func(chat, code string) (map[string]any, string) {
		st, body := srv.API("POST", "/api/chats/"+chat+"/exec", map[string]string{"user_id": "u1", "code": code})
		if st != 200 {
			t.Errorf("exec in %s: %d %s", chat, st, body)
			return nil, body
		}
		var res map[string]any
		json.Unmarshal([]byte(body), &res)
		return res, body
	}
	// The plugin is up.
	if _, body := exec("bee", "print(maybe_die(False))"); !strings.Contains(body, "alive") {
		t.Fatalf("first call: %s", body)
	}
	var wg sync.WaitGroup
	var attacker string
	wg.Go(func() {
		_, attacker = exec("ant", `
import time
t0 = time.time()
n = 0
while time.time() - t0 < 12:
    n += 1
    try:
        maybe_die(True)
    except Exception as e:
        print("CALL", n, type(e).__name__, e)
    time.sleep(0.05)
`)
	})
	_, victim := exec("bee", `
import time
t0 = time.time()
worst = 0
fails = []
while time.time() - t0 < 14:
    s = time.time()
    try:
        maybe_die(False)
    except Exception as e:
        fails.append(str(e)[:300])
    worst = max(worst, time.time() - s)
    time.sleep(0.1)
print("WORST %.2f" % worst)
print("FAILS", len(fails), fails[:3])
`)
	wg.Wait()
	// Right after.
	start := time.Now()
	_, after := exec("bee", "print(maybe_die(False))")
	if !strings.Contains(after, "alive") || time.Since(start) > 8*time.Second {
		t.Errorf("the other chat's call right after took %s: %s", time.Since(start), after)
	}
	t.Logf("attacker: %s\nvictim: %s", attacker, victim)
	m := regexp.MustCompile(`WORST (\d+\.\d+)`).FindStringSubmatch(victim)
	if m == nil {
		t.Fatalf("no timing from the other chat: %s", victim)
	}
	if s, _ := strconv.ParseFloat(m[1], 64); s > 5 {
		t.Errorf("a call of the other chat waited %.2f s while one chat crashed the plugin", s)
	}
	// A call in flight when the other chat crashes the process dies with
	// it (the process is shared); the chat is neither refused nor made to
	// wait for a backoff, and that happens at most a few times before the
	// crashing chat is refused.
	if f := regexp.MustCompile(`FAILS (\d+)`).FindStringSubmatch(victim); f == nil {
		t.Errorf("no failure count from the other chat: %s", victim)
	} else if n, _ := strconv.Atoi(f[1]); n > 3 || strings.Contains(victim, "refuse") {
		t.Errorf("the other chat's calls failed %d times while one chat crashed the plugin: %s", n, victim)
	}
	if !strings.Contains(attacker, "refused") || !strings.Contains(attacker, "until") {
		t.Errorf("the crashing chat's calls are not refused with a reason: %s", attacker)
	}
	// The operator sees which chat did it.
	srv.Stop()
	if logs := srv.Logs.String(); !regexp.MustCompile(`chat=ant\b.*plugin=tester.pyguard|plugin=tester.pyguard.*chat=ant\b`).MatchString(logs) {
		t.Errorf("the log does not name the chat that crashed the plugin:\n%s", logs)
	}
}
