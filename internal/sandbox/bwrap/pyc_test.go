package bwrap

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/internal/sandbox/stub"
)

// Once the runner has compiled a run file's content, a fresh sandbox
// starts from its byte code (boot.pyc as the script, api_caller's pyc in
// __pycache__) instead of compiling the source; before that it compiles
// the source as always. The byte code here is deliberately of another
// source, so the output tells which one the sandbox used.
func TestFreshSandboxUsesCompiledRunFiles(t *testing.T) {
	r := New("")
	r.CompileRunFiles = true
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := r.Check(ctx); err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
	defer r.Close()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // the sandbox's uid opens the mount sources
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	shared, uploads := filepath.Join(dir, "shared"), filepath.Join(dir, "uploads")
	for _, d := range []string{shared, uploads} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o777)
	}
	caller := []byte("MARK = 'source'\n__all__ = ['MARK']\n\n\ndef _prepare_run():\n    pass\n")
	files := map[string][]byte{"boot.py": stub.Boot(), "api_caller.py": caller, "chat_key": []byte("c")}
	run := func() string {
		t.Helper()
		p, err := r.Start(ctx, sandbox.Spec{Files: files, SharedDir: shared, UploadsDir: uploads, UID: -1, GID: -1})
		if err != nil {
			t.Fatal(err)
		}
		code := `import sys
print(MARK, sys.argv[0])
for f in ("/app/.nekro/api_caller.py", "/app/.nekro/boot.pyc", "/app/.nekro/new"):
    try:
        open(f, "a").close()
        print("WROTE", f)
    except OSError as e:
        print("denied", e.errno)
1/0
`
		if err := p.Release(ctx, []byte(code)); err != nil {
			o, _ := p.Wait(ctx, time.Minute)
			t.Fatalf("%v: %+v", err, o)
		}
		o, err := p.Wait(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return o.Output
	}
	check := func(out, mark string) {
		t.Helper()
		for _, want := range []string{mark + " /app/.nekro/boot.py\n", "File \"main.py\", line 9", "ZeroDivisionError"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "WROTE") {
			t.Errorf("the run wrote to /app/.nekro:\n%s", out)
		}
	}
	if len(r.withPyc(files)) != len(files) {
		t.Fatal("byte code before anything was compiled")
	}
	check(run(), "source")

	// Wait for the byte code of both, then put in api_caller's place the
	// byte code of another source.
	other, err := r.compilePyc("api_caller.py", []byte(strings.Replace(string(caller), "'source'", "'bytecode'", 1)))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); len(r.withPyc(files)) != len(files)+2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never compiled: %v", r.withPyc(files))
		}
	}
	r.pyc.mu.Lock()
	r.pyc.entries[makePycKey(r.Python, "api_caller.py", caller)] = other
	r.pyc.mu.Unlock()
	with := r.withPyc(files)
	if _, ok := with["boot.pyc"]; !ok {
		t.Fatalf("no boot.pyc: %v", with)
	}
	if _, ok := with["__pycache__/api_caller."+other.tag+".pyc"]; !ok {
		t.Fatalf("no api_caller pyc: %v", with)
	}
	check(run(), "bytecode")
}

// Byte code is keyed by the interpreter's file as well as its path: an
// interpreter replaced in place (a Python upgrade) gets its own, and is
// never started on byte code with another's magic number.
func TestPycKeyFollowsTheInterpreterFile(t *testing.T) {
	py := filepath.Join(t.TempDir(), "python3")
	if err := os.WriteFile(py, []byte("3.11"), 0o755); err != nil {
		t.Fatal(err)
	}
	src := []byte("pass\n")
	k := makePycKey(py, "boot.py", src)
	if makePycKey(py, "boot.py", src) != k {
		t.Fatal("the key changes with nothing changed")
	}
	if makePycKey(py, "boot.py", []byte("pass  \n")) == k || makePycKey(py, "zygote.py", src) == k {
		t.Error("the key ignores the content or the name")
	}
	tmp := py + ".new"
	if err := os.WriteFile(tmp, []byte("3.12!"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, py); err != nil {
		t.Fatal(err)
	}
	if makePycKey(py, "boot.py", src) == k {
		t.Error("the key stayed when the interpreter was replaced")
	}
}
