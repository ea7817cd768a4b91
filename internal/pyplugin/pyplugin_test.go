package pyplugin_test

import (
	"archive/zip"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/testutil"
)

const pluginDir = "testdata/plugins"

// execPy runs code with `nekro exec` and the test plugins.
func execPy(t *testing.T, data, code string, flags ...string) testutil.Result {
	t.Helper()
	args := append([]string{"exec", "--data", data, "--plugin-dir", pluginDir, "--chat", "c1", "--user", "u1"}, flags...)
	return testutil.RunNekro(t, []byte(code), append(args, "-")...)
}

// A Python plugin written to the documents' API runs next to the Go
// plugins: its methods are called from the sandbox like Go ones, its
// store is the one `nekro kv` reads, bytes, messages, BEHAVIOR and AGENT
// results work, and its init and cleanup hooks run.
func TestPythonPluginMethodsStoreAndHooks(t *testing.T) {
	data := testutil.DataDir(t)
	r := execPy(t, data, `
print("save", save_note("hello", ["a"]), save_note("hello again"))
print("read", read_note())
print("bytes", count_bytes(b"12345"))
print("announce", announce("hi chat"))
`)
	if r.Code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	for _, w := range []string{"save 0 1", "read {'text': 'hello again', 'tags': [], 'user': 'u1'}", "bytes 5", "announce sent: hi chat"} {
		if !strings.Contains(r.Stdout, w) {
			t.Errorf("output lacks %q:\n%s", w, r.Stdout)
		}
	}
	if !strings.Contains(r.Stderr, "sent to chat c1: hi chat") {
		t.Errorf("the message did not reach the chat:\n%s", r.Stderr)
	}
	if !strings.Contains(r.Stderr, "broken.py") || !strings.Contains(r.Stderr, "MissingPluginInstance") {
		t.Errorf("the file without a plugin is not reported by name:\n%s", r.Stderr)
	}
	// What the Python plugin wrote is what nekro kv reads.
	kv := func(args ...string) string {
		t.Helper()
		r := testutil.RunNekro(t, nil, append([]string{"kv", "get", "--data", data, "--plugin", "tester.pynotes"}, args...)...)
		return strings.TrimSpace(r.Stdout)
	}
	var note map[string]any
	if err := json.Unmarshal([]byte(kv("--chat", "c1", "note")), &note); err != nil || note["text"] != "hello again" {
		t.Errorf("nekro kv reads %v (%v)", note, err)
	}
	if got := kv("inits"); got != "1" {
		t.Errorf("init hook ran %s times, want 1", got)
	}
	if got := kv("cleaned"); got != "yes" {
		t.Errorf("cleanup hook did not run at exit: %q", got)
	}
	testutil.MountVolumes(t, data)
	if b, err := os.ReadFile(filepath.Join(data, "plugins", "tester.pynotes", "init.txt")); err != nil || string(b) != "initialized" {
		t.Errorf("get_plugin_data_dir: %q, %v", b, err)
	}

	// An AGENT method ends the run.
	r = execPy(t, data, "ask_model('life')\nprint('not reached')")
	if r.Code != 8 || strings.Contains(r.Stdout, "not reached") || !strings.Contains(r.Stdout, "the answer to 'life' is 42") {
		t.Errorf("agent method: %+v", r)
	}
	// The chat's reset runs the plugin's reset hook.
	if r := testutil.RunNekro(t, nil, "--data", data, "--plugin-dir", pluginDir, "chats", "reset", "c1"); r.Code != 0 {
		t.Fatalf("reset: %+v", r)
	}
	if got := kv("--chat", "c1", "note"); got != "" {
		t.Errorf("the reset hook left the note: %q", got)
	}
}

// A plugin that raises fails that call; one that kills its process fails
// the call and is restarted (its init runs again); one that hangs fails
// at the deadline and is restarted; nekro survives all of them.
func TestPythonPluginFailuresStayContained(t *testing.T) {
	data := testutil.DataDir(t)
	r := execPy(t, data, `
def attempt(label, f):
    try:
        print(label, "returned", f())
    except Exception as e:
        print(label, type(e).__name__, e)
attempt("explode", explode)
attempt("die", die)
attempt("after-die", lambda: slow(0.01))
attempt("hang", hang)
attempt("after-hang", lambda: slow(0.01))
`, "--call-timeout", "2s")
	if r.Code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	for _, w := range []string{
		"explode PluginError RuntimeError: boom from python",
		"die PluginError plugin tester.pynotes: its process ended during the call",
		"after-die returned 0.01",
		"hang NekroError hang(): the method did not answer within 2s",
		"after-hang returned 0.01",
	} {
		if !strings.Contains(r.Stdout, w) {
			t.Errorf("output lacks %q:\n%s", w, r.Stdout)
		}
	}
	out := testutil.RunNekro(t, nil, "kv", "get", "--data", data, "--plugin", "tester.pynotes", "inits")
	if n, _ := strconv.Atoi(strings.TrimSpace(out.Stdout)); n != 3 {
		t.Errorf("init ran %q times, want 3 (start and two restarts)", out.Stdout)
	}
}

// Calls from several processes of one run (each has its own connection)
// are served at the same time.
func TestPythonPluginServesConcurrentCalls(t *testing.T) {
	data := testutil.DataDir(t)
	r := execPy(t, data, `
import os, time
slow(0.01)  # the plugin is up
t0 = time.time()
kids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        slow(1.0)
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
print("ELAPSED %.2f" % (time.time() - t0))
`)
	m := regexp.MustCompile(`ELAPSED (\d+\.\d+)`).FindStringSubmatch(r.Stdout)
	if r.Code != 0 || m == nil {
		t.Fatalf("exec: %+v", r)
	}
	if s, _ := strconv.ParseFloat(m[1], 64); s >= 3.5 {
		t.Errorf("four 1 s calls took %.2f s: served one after another", s)
	}
}

// _ctx.fs and the path helpers, as seeds 002 and 003 use them: sandbox
// paths map to this chat's directories both ways, files reach the
// sandbox, and paths outside are ValueErrors.
func TestPythonPluginFiles(t *testing.T) {
	data := testutil.DataDir(t)
	up := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(up, []byte("uploaded notes"), 0o644)
	r := execPy(t, data, `
print("read", read_upload("/app/uploads/notes.txt"), read_upload("uploads/notes.txt"))
p = write_report("quarterly")
print("report", p, open(p).read())
s = share_bytes(b"shared bytes", "b.bin")
print("shared", s, open(s, "rb").read())
f = forward_shared("f.txt")
print("forwarded", f, open(f).read())
for bad in ("/etc/passwd", "/app/shared/../uploads/notes.txt", "/app/other/x"):
    try:
        read_upload(bad)
        print("READ", bad)
    except Exception as e:
        print("refused", bad, "ValueError" in str(e))
`, "--upload", up)
	if r.Code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	for _, w := range []string{
		"read uploaded notes uploaded notes",
		"report /app/uploads/report.txt quarterly",
		"shared /app/shared/b.bin b'shared bytes'",
		"forwarded /app/shared/f.txt from the plugin",
		"refused /etc/passwd True", "refused /app/shared/../uploads/notes.txt True", "refused /app/other/x True",
	} {
		if !strings.Contains(r.Stdout, w) {
			t.Errorf("output lacks %q:\n%s", w, r.Stdout)
		}
	}
	if strings.Contains(r.Stdout, "READ") {
		t.Errorf("a path outside was read:\n%s", r.Stdout)
	}
}

// writeWheel writes a minimal pure-Python wheel of nekrotestpkg 1.0 into
// dir, the way a package index would serve it.
func writeWheel(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "nekrotestpkg-1.0-py3-none-any.whl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z := zip.NewWriter(f)
	files := map[string]string{
		"nekrotestpkg/__init__.py":            "VALUE = 42\n",
		"nekrotestpkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: nekrotestpkg\nVersion: 1.0\n",
		"nekrotestpkg-1.0.dist-info/WHEEL":    "Wheel-Version: 1.0\nGenerator: nekro-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
	}
	record := ""
	for name, body := range files {
		w, _ := z.Create(name)
		w.Write([]byte(body))
		record += name + ",,\n"
	}
	w, _ := z.Create("nekrotestpkg-1.0.dist-info/RECORD")
	w.Write([]byte(record + "nekrotestpkg-1.0.dist-info/RECORD,,\n"))
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
}

// dynamic_import_pkg installs a missing package into the plugin's own
// directory from the operator's index (here a directory of wheels, offline),
// keeps it for later starts, and without an index says which flag to set.
func TestDynamicImportPkgInstallsFromTheOperatorsIndex(t *testing.T) {
	wheels := t.TempDir()
	writeWheel(t, wheels)
	run := func(data string, flags ...string) testutil.Result {
		args := append([]string{"exec", "--data", data, "--plugin-dir", "testdata/pkgplugins", "--chat", "c1"}, flags...)
		return testutil.RunNekro(t, []byte("print('VALUE', use_pkg())"), append(args, "-")...)
	}
	data := testutil.DataDir(t)
	if r := run(data, "--python-index", wheels); r.Code != 0 || !strings.Contains(r.Stdout, "VALUE 42") {
		t.Fatalf("with the index: %+v", r)
	}
	if r := run(data); r.Code != 0 || !strings.Contains(r.Stdout, "VALUE 42") {
		t.Fatalf("installed before, no index now: %+v", r)
	}
	r := run(testutil.DataDir(t))
	if r.Code == 0 || !strings.Contains(r.Stdout+r.Stderr, "--python-index") {
		t.Fatalf("without an index: want an error naming --python-index: %+v", r)
	}
}
