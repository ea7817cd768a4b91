package attack_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/testutil"
)

// allocated is the disk space the files under dir take on the host,
// counted by allocated blocks (images are sparse).
func allocated(t *testing.T, dir string) int64 {
	t.Helper()
	var total int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil {
			total += fi.Sys().(*syscall.Stat_t).Blocks * 512
		}
		return nil
	})
	return total
}

// number reads "LABEL n" from out.
func number(t *testing.T, out, label string) int64 {
	t.Helper()
	m := regexp.MustCompile(label + ` (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %q in the output:\n%s", label, out)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// Code writing /app/shared is stopped while it writes, by bytes and by
// files, however deep it hides them; the host's disk holds at most the
// quota; and the chat's next run is not slowed by what the last one left.
func TestSharedDirectoryIsBoundedWhileTheCodeWrites(t *testing.T) {
	requireRoot(t)
	data := testutil.DataDir(t)
	quota := []string{"--shared-quota", "64MiB", "--shared-inodes", "2000"}
	r := execCode(t, data, "filler", `
import os, errno
def report(label, n, e):
    print(label, n, errno.errorcode.get(e.errno, e.errno))

# Bytes, at the bottom of a chain of directories deeper than PATH_MAX.
os.chdir("/app/shared")
for i in range(40):
    os.mkdir("d" * 200)
    os.chdir("d" * 200)
fd = os.open("big", os.O_WRONLY | os.O_CREAT)
chunk, n = b"x" * (1 << 20), 0
try:
    for i in range(1024):  # 1 GiB
        n += os.write(fd, chunk)
    print("BYTES", n, "no error")
except OSError as e:
    report("BYTES", n, e)
os.close(fd)

# Files.
os.chdir("/app/shared")
os.mkdir("many")
n = 0
try:
    for i in range(100000):
        open("many/%d" % i, "w").close()
        n += 1
    print("FILES", n, "no error")
except OSError as e:
    report("FILES", n, e)
`, nil, nil, quota...)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, label := range []string{"BYTES", "FILES"} {
		if !regexp.MustCompile(label + ` \d+ (ENOSPC|EDQUOT)`).MatchString(r.stdout) {
			t.Errorf("%s: want the write refused with ENOSPC or EDQUOT:\n%s", label, r.stdout)
		}
	}
	if n := number(t, r.stdout, "BYTES"); n > 64<<20 || n < 32<<20 {
		t.Errorf("the code wrote %d MiB under a 64 MiB quota", n>>20)
	}
	if n := number(t, r.stdout, "FILES"); n > 2000 {
		t.Errorf("the code made %d files under a 2000-file quota", n)
	}
	// The plugins' own volumes (a journaled image each for every built-in
	// with settings) are a fixed cost, bounded by their own quota and
	// tested in TestPluginDataDirectoryIsBounded: what the code wrote is
	// the rest.
	if host := allocated(t, data) - allocated(t, filepath.Join(data, "volumes", "plugins")); host > 96<<20 {
		t.Errorf("the data directory takes %d MiB of the host's disk after a 64 MiB quota", host>>20)
	}

	// The full directory costs the next run nothing it would notice: it
	// starts, sees its files, and can free space.
	r = execCode(t, data, "filler", `
import os, shutil
print("LEFT", len(os.listdir("/app/shared/many")))
shutil.rmtree("/app/shared/many")
open("/app/shared/after.txt", "w").write("room again")
print("WROTE")
`, nil, nil, quota...)
	if r.code != 0 || !strings.Contains(r.stdout, "WROTE") {
		t.Fatalf("the next run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// A plugin writing its data directory through DataRoot is bounded the same
// way, and the error the code sees names the quota and its flag.
func TestPluginDataDirectoryIsBounded(t *testing.T) {
	requireRoot(t)
	data := testutil.DataDir(t)
	r := execCode(t, data, "saver", `
n = 0
try:
    for i in range(40):
        save_image(b"x" * (4 << 20), "img%d.png" % i)
        n += 4
    print("SAVED", n, "no error")
except Exception as e:
    print("SAVED", n, "refused:", e)
`, nil, nil, "--plugin-data-quota", "16MiB")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if n := number(t, r.stdout, "SAVED"); n > 16 {
		t.Errorf("the plugin saved %d MiB under a 16 MiB quota:\n%s", n, r.stdout)
	}
	for _, w := range []string{"no space left on device", "--plugin-data-quota"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("the refusal does not say %q:\n%s", w, r.stdout)
		}
	}
	if host := allocated(t, filepath.Join(data, "volumes", "plugins")); host > 24<<20 {
		t.Errorf("plugin data takes %d MiB of the host's disk under a 16 MiB quota", host>>20)
	}
}

// A plugin's KV values are bounded: by the operator's --kv-quota here (by
// 256 MiB when none is given), and the refusal names the flag.
func TestKVQuotaStopsARunawayPlugin(t *testing.T) {
	data := testutil.DataDir(t)
	r := execCode(t, data, "kv", `
n = 0
try:
    for i in range(64):
        save_preference("k%d" % i, "v" * 900000)
        n += 1
    print("SAVED", n, "no error")
except Exception as e:
    print("SAVED", n, "refused:", e)
`, nil, nil, "--kv-quota", "4MiB", "--plugins", "nekro_examples.kvstore")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if n := number(t, r.stdout, "SAVED"); n > 4 {
		t.Errorf("%d values of 900 kB were saved under a 4 MiB quota:\n%s", n, r.stdout)
	}
	for _, w := range []string{"quota of plugin nekro_examples.kvstore", "--kv-quota"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("the refusal does not say %q:\n%s", w, r.stdout)
		}
	}
	if db := allocated(t, data); db > 32<<20 {
		t.Errorf("the data directory grew to %d MiB under a 4 MiB KV quota", db>>20)
	}
}

// peakRSS runs nekro with args and returns its own peak resident memory
// (VmHWM, sampled while it runs: its children are not counted) and what
// it printed.
func peakRSS(t *testing.T, code string, args ...string) (int64, result) {
	t.Helper()
	cmd := exec.Command(testutil.NekroExamples(t), args...)
	cmd.Stdin = strings.NewReader(code)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var peak int64
	status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
	for {
		if b, err := os.ReadFile(status); err == nil {
			if m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(b); m != nil {
				kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
				peak = max(peak, kb<<10)
			}
		}
		select {
		case <-done:
			return peak, result{out.String(), errb.String(), cmd.ProcessState.ExitCode()}
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Whatever the code sends, one run makes the host hold at most 256 MiB
// more than a run of "pass", and its record stays small: eight
// connections sending 16 MiB requests, and thousands of calls whose
// errors echo what they were sent.
func TestOneRunCannotExhaustHostMemory(t *testing.T) {
	data := testutil.DataDir(t)
	args := []string{"exec", "--data", data, "--chat", "hog", "--user", "u1", "--json", "--timeout", "120s", "-"}
	base, r := peakRSS(t, "pass", args...)
	if r.code != 0 {
		t.Fatalf("pass: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	hog, r := peakRSS(t, `
import api_caller, json, threading
# A 16 MiB request whose error would echo its file name, on eight
# connections at once, twice each.
big = ('{"id":1,"method":"save_image","args":{"image_data":"","filename":"%s"}}\n'
       % ("a/" * ((8 << 20) - 64))).encode()
answers = []
def flood():
    s = api_caller._connect()
    f = s.makefile("rb")
    for _ in range(2):
        s.sendall(big)
        answers.append(len(f.readline()))
threads = [threading.Thread(target=flood) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print("ANSWERS", len(answers), max(answers))
# Thousands of small calls whose errors echo what they were sent: an
# unexpected argument named with 100 kB.
s = api_caller._connect()
f = s.makefile("rb")
req = ('{"id":2,"method":"save_image","args":{"image_data":"","filename":"x","%s":1}}\n' % ("z" * 100000)).encode()
errors = 0
for i in range(2500):
    s.sendall(req)
    if b'"error"' in f.readline():
        errors += 1
print("ERRORS", errors)
`, args...)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var res struct {
		Output      string            `json:"output"`
		Calls       []json.RawMessage `json:"calls"`
		NotRecorded int               `json:"calls_not_recorded"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if !strings.Contains(res.Output, "ANSWERS 16") || !strings.Contains(res.Output, "ERRORS 2500") {
		t.Fatalf("the attack did not run to its end:\n%s", res.Output)
	}
	if m := regexp.MustCompile(`ANSWERS 16 (\d+)`).FindStringSubmatch(res.Output); m == nil || len(m[1]) > 4 {
		t.Errorf("an answer to a 16 MiB request echoed it: %v", m)
	}
	t.Logf("peak host memory: pass %d MiB, attack %d MiB; record %d bytes", base>>20, hog>>20, len(r.stdout))
	if hog-base > 256<<20 {
		t.Errorf("one run took the host from %d MiB to %d MiB", base>>20, hog>>20)
	}
	if len(r.stdout) > 4<<20 || res.NotRecorded == 0 {
		t.Errorf("the run's record is %d MiB, %d calls left out", len(r.stdout)>>20, res.NotRecorded)
	}
}

// `nekro doctor` says which protections are in force: all of them when
// nekro runs as root on a host with loop devices, and a warning for what
// the operator turned off.
func TestDoctorReportsProtections(t *testing.T) {
	requireRoot(t)
	data := testutil.DataDir(t)
	r := nekro(t, nil, nil, "", "doctor", "--data", data)
	if r.code != 0 {
		t.Fatalf("doctor: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, w := range []string{"ok   inherited descriptors", "ok   clean sandbox environment", "ok   RPC by descriptor",
		"ok   seccomp filter: denies", "ok   a uid per chat", "ok   bounded directories", "ok   download guard", "ok   KV quota: 256MiB"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("doctor does not report %q:\n%s", w, r.stdout)
		}
	}
	r = nekro(t, []string{"NEKRO_KV_QUOTA=none"}, nil, "", "doctor", "--data", data)
	if !strings.Contains(r.stdout, "warn KV quota: none") {
		t.Errorf("doctor does not warn of an unbounded KV store:\n%s", r.stdout)
	}
}
