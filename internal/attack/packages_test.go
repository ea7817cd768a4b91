package attack_test

import (
	"archive/zip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/testutil"
)

// execAs runs code with `nekro exec` in chat as user, with the KV store
// examples (whose notes are the user's own: add_note, get_note).
func execAs(t *testing.T, data, chat, user, code string, flags ...string) result {
	t.Helper()
	args := append([]string{"exec", "--data", data, "--chat", chat, "--user", user,
		"--plugins", "nekro_examples.kvstore"}, flags...)
	return nekro(t, nil, nil, code, append(args, "-")...)
}

// plantingRoutes is alice's code: every way it could leave importable
// code where a later run of the chat imports from, each attempt printed
// as PLANTED or BLOCKED. The payload, once imported in a run, prints a
// marker with what get_note (the importing run's user's data) answers.
const plantingRoutes = `
import errno, os
L = "/app/shared/.packages"
PAYLOAD = 'import api_caller\nprint("ALICE-CODE-RAN", api_caller.get_note("n1"))\n'

def attempt(route, f):
    try:
        f()
        print("PLANTED", route)
    except OSError as e:
        print("BLOCKED", route, errno.errorcode.get(e.errno, e.errno))

def write(path, text=PAYLOAD):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)

attempt("module", lambda: write(L + "/torch.py"))
attempt("package", lambda: write(L + "/torch/__init__.py"))
attempt("pth", lambda: write(L + "/nekro-hook.pth", "import torch\n"))
attempt("bytecode", lambda: write(L + "/__pycache__/torch.cpython-311.pyc", "x"))
attempt("symlink", lambda: os.symlink("/app/shared/mine", L + "/torch"))
def swap():
    os.rename(L, "/app/shared/old-layer")
    write(L + "/torch.py")
attempt("rename", swap)
def replace():
    os.rmdir(L)
    write(L + "/torch.py")
attempt("rmdir", replace)
# The shared directory itself is the chat's, and on no run's sys.path.
for name in ("torch.py", "sitecustomize.py", "usercustomize.py"):
    write("/app/shared/" + name)
print("DONE")
`

// importTorch is bob's run: it imports torch, itself and in a program it
// starts, as code that expects an installed package does.
const importTorch = `
import subprocess, sys
try:
    import torch
    print("IMPORTED", torch.__file__)
except ImportError as e:
    print("IMPORT-ERROR", type(e).__name__, e)
child = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True)
print("CHILD", child.returncode, child.stdout, child.stderr.strip().splitlines()[-1:])
`

// Code written by one user's run is never imported by another user's run
// as an installed package: in a chat with two users, alice's run cannot
// write the chat's package layer (/app/shared/.packages) by any route,
// even before the layer exists, so bob's `import torch` fails instead of
// running alice's code with bob's identity (which would read bob's notes).
// `pip install` through nekro still fills the layer, for both users.
func TestOneUsersCodeNeverImportsAsAnotherUsersPackage(t *testing.T) {
	data := testutil.DataDir(t)
	wheels := testWheelDir(t, data, "nekrolayerpkg")
	// Alice's run is the chat's first: no layer exists yet.
	r := execAs(t, data, "c", "alice", plantingRoutes)
	if r.code != 0 || !strings.Contains(r.stdout, "DONE") {
		t.Fatalf("alice's run: %+v", r)
	}
	for _, route := range []string{"module", "package", "pth", "bytecode", "symlink", "rename", "rmdir"} {
		if !strings.Contains(r.stdout, "BLOCKED "+route+" ") {
			t.Errorf("alice's code could plant by %s: %s", route, r.stdout)
		}
	}
	r = execAs(t, data, "c", "bob", `print(add_note("n1", "bank", "bob-secret-4242"))`)
	if r.code != 0 || !strings.Contains(r.stdout, "已添加") {
		t.Fatalf("bob's note: %+v", r)
	}
	r = execAs(t, data, "c", "bob", importTorch)
	if strings.Contains(r.stdout+r.stderr, "ALICE-CODE-RAN") || strings.Contains(r.stdout+r.stderr, "bob-secret-4242") ||
		strings.Contains(r.stdout, "IMPORTED") {
		t.Fatalf("bob's run imported alice's code: %+v", r)
	}
	if r.code != 0 || !strings.Contains(r.stdout, "IMPORT-ERROR ModuleNotFoundError No module named 'torch'") ||
		!strings.Contains(r.stdout, "No module named 'torch'\"]") {
		t.Fatalf("want torch missing in bob's run and in the program it starts: %+v", r)
	}

	// The installer still writes the layer; both users import what it
	// installed, and neither can change it.
	r = execAs(t, data, "c", "alice", `
import subprocess
done = subprocess.run(["pip", "install", "nekrolayerpkg"], capture_output=True, text=True)
print("PIP", done.returncode, done.stdout, done.stderr)
import nekrolayerpkg
print("VALUE", nekrolayerpkg.VALUE)
try:
    with open(nekrolayerpkg.__file__, "a") as f:
        f.write('\nprint("ALICE-CODE-RAN")\n')
    print("PLANTED installed")
except OSError as e:
    print("BLOCKED installed", e)
`, "--python-index", wheels)
	if r.code != 0 || !strings.Contains(r.stdout, "PIP 0") || !strings.Contains(r.stdout, "VALUE 42") ||
		!strings.Contains(r.stdout, "BLOCKED installed") {
		t.Fatalf("alice's install: %+v", r)
	}
	r = execAs(t, data, "c", "bob", "import nekrolayerpkg\nprint('VALUE', nekrolayerpkg.VALUE)\n")
	if r.code != 0 || !strings.Contains(r.stdout, "VALUE 42") || strings.Contains(r.stdout, "ALICE-CODE-RAN") {
		t.Fatalf("bob's import of the installed package: %+v", r)
	}
}

// testWheelDir writes a pure-Python wheel of name 1.0 (a module with
// VALUE = 42) into a directory next to data that sandboxes, running as
// other uids, can read: an operator's wheel directory.
func testWheelDir(t *testing.T, data, name string) string {
	t.Helper()
	dir := filepath.Join(filepath.Dir(data), "wheels-"+name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, name+"-1.0-py3-none-any.whl"))
	if err != nil {
		t.Fatal(err)
	}
	z := zip.NewWriter(f)
	record := ""
	for _, fb := range [][2]string{
		{name + "/__init__.py", "VALUE = 42\n"},
		{name + "-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: " + name + "\nVersion: 1.0\n"},
		{name + "-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: nekro-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	} {
		w, err := z.Create(fb[0])
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(fb[1]))
		record += fb[0] + ",,\n"
	}
	w, _ := z.Create(name + "-1.0.dist-info/RECORD")
	w.Write([]byte(record + name + "-1.0.dist-info/RECORD,,\n"))
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A layer an older nekro let runs write (no record of the host's that only
// the installer wrote it) may hold code a user's run planted there: the
// chat's first run under this nekro finds it emptied, so bob's import of
// what alice's run left fails.
func TestALayerOlderRunsCouldWriteIsEmptied(t *testing.T) {
	data := testutil.DataDir(t)
	if r := execAs(t, data, "c", "alice", "print('hello')"); r.code != 0 {
		t.Fatalf("the chat's first run: %+v", r)
	}
	// What an older nekro left: alice's module in the layer, no record.
	testutil.MountVolumes(t, data)
	layer := filepath.Join(files.Layout{Root: data}.SharedDir(files.ContainerKey("c")), ".packages")
	st, err := os.Stat(layer)
	if err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(layer, "torch.py")
	if err := os.WriteFile(planted, []byte("import api_caller\nprint(\"ALICE-CODE-RAN\", api_caller.get_note(\"n1\"))\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if own, ok := st.Sys().(*syscall.Stat_t); ok {
		os.Lchown(planted, int(own.Uid), int(own.Gid))
	}
	if err := os.RemoveAll(filepath.Join(data, "layers")); err != nil {
		t.Fatal(err)
	}
	if r := execAs(t, data, "c", "bob", `print(add_note("n1", "bank", "bob-secret-4242"))`); r.code != 0 {
		t.Fatalf("bob's note: %+v", r)
	}
	r := execAs(t, data, "c", "bob", importTorch)
	if strings.Contains(r.stdout+r.stderr, "ALICE-CODE-RAN") || strings.Contains(r.stdout+r.stderr, "bob-secret-4242") ||
		!strings.Contains(r.stdout, "IMPORT-ERROR ModuleNotFoundError No module named 'torch'") {
		t.Fatalf("bob's run imported what an older nekro let alice's run leave: %+v", r)
	}
	if _, err := os.Lstat(planted); err == nil {
		t.Errorf("%s is still in the layer", planted)
	}
}
