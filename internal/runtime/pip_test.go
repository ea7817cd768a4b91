package runtime_test

import (
	"archive/zip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/host"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/testutil"
	"github.com/nekro-go/nekro/plugin"
)

// wheelDir writes a pure-Python wheel of name 1.0 (a module with VALUE =
// 42, plus a file of extra bytes when extra > 0) into a directory next to
// data that sandboxes, running as other uids, can read, the way an
// operator's wheel directory is; the wheel depends on numpy, which the
// sandbox's system has, so the index need not.
func wheelDir(t *testing.T, data, name string, extra int) string {
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
	files := [][2]string{
		{name + "/__init__.py", "VALUE = 42\n"},
		{name + "-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: " + name + "\nVersion: 1.0\nRequires-Dist: numpy\n"},
		{name + "-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: nekro-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	if extra > 0 {
		files = append(files, [2]string{name + "/blob.bin", strings.Repeat("x", extra)})
	}
	record := ""
	for _, fb := range files {
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

func execIn(t *testing.T, data, chat, code string, flags ...string) testutil.Result {
	t.Helper()
	args := append([]string{"exec", "--data", data, "--chat", chat, "--user", "u"}, flags...)
	return testutil.RunNekro(t, []byte(code), append(args, "-")...)
}

// pip install in a run installs from the operator's wheel directory into
// the chat's own layer: the code imports it at once, the chat's next run
// imports it without installing (and without an index), programs the run
// starts see it too, and another chat cannot import it.
func TestPipInstallsIntoTheChatsOwnLayer(t *testing.T) {
	data := testutil.DataDir(t)
	wheels := wheelDir(t, data, "nekrotestpkg", 0)
	r := execIn(t, data, "alpha", `
import subprocess, sys
done = subprocess.run(["pip", "install", "nekrotestpkg"], capture_output=True, text=True)
print("PIP", done.returncode, done.stdout, done.stderr)
import nekrotestpkg
print("VALUE", nekrotestpkg.VALUE, nekrotestpkg.__file__)
`, "--python-index", wheels)
	if r.Code != 0 || !strings.Contains(r.Stdout, "PIP 0") || !strings.Contains(r.Stdout, "Successfully installed nekrotestpkg-1.0") ||
		!strings.Contains(r.Stdout, "VALUE 42 /app/shared/.packages/nekrotestpkg/__init__.py") {
		t.Fatalf("install and import: %+v", r)
	}
	if !strings.Contains(r.Stdout, "Requirement already satisfied: numpy in /usr/lib") {
		t.Errorf("numpy, which the system has, was not taken from the system: %s", r.Stdout)
	}
	// The next run: no index, no install.
	r = execIn(t, data, "alpha", `
import nekrotestpkg, subprocess, sys, pip
print("AGAIN", nekrotestpkg.VALUE)
print(subprocess.run([sys.executable, "-c", "import nekrotestpkg; print('CHILD', nekrotestpkg.VALUE)"], capture_output=True, text=True).stdout)
pip.main(["freeze"])
`)
	if r.Code != 0 || !strings.Contains(r.Stdout, "AGAIN 42") || !strings.Contains(r.Stdout, "CHILD 42") ||
		!strings.Contains(r.Stdout, "nekrotestpkg==1.0") {
		t.Fatalf("the chat's next run: %+v", r)
	}
	// Another chat, even with the index configured, has none of it.
	r = execIn(t, data, "beta", "import nekrotestpkg\n", "--python-index", wheels)
	if r.Code != 1 || !strings.Contains(r.Stdout+r.Stderr, "No module named 'nekrotestpkg'") {
		t.Fatalf("another chat imported the package: %+v", r)
	}
	// python -m pip works the same; what would make pip fetch what the
	// code names (a URL, another index) is refused.
	r = execIn(t, data, "beta", `
import subprocess, sys
print("M", subprocess.run([sys.executable, "-m", "pip", "install", "-q", "nekrotestpkg"]).returncode)
import nekrotestpkg
print("VALUE", nekrotestpkg.VALUE)
import pip
print("URL", pip.main(["install", "nekrotestpkg @ https://example.org/x.whl"]))
print("IDX", pip.main(["install", "--index-url", "https://example.org/simple", "nekrotestpkg"]))
`, "--python-index", wheels)
	if r.Code != 0 || !strings.Contains(r.Stdout, "M 0") || !strings.Contains(r.Stdout, "VALUE 42") ||
		!strings.Contains(r.Stdout, "URL 1") || !strings.Contains(r.Stdout, "IDX 1") ||
		!strings.Contains(r.Stdout+r.Stderr, "is not a package requirement nekro installs") {
		t.Fatalf("python -m pip and refusals: %+v", r)
	}
}

// Without an index, pip install says how the operator sets one.
func TestPipWithoutAnIndexSaysHowToSetOne(t *testing.T) {
	r := execIn(t, testutil.DataDir(t), "alpha", `
import subprocess
done = subprocess.run(["pip3", "install", "requests"], capture_output=True, text=True)
print("PIP", done.returncode, done.stderr)
`)
	want := "packages come from the operator's index: set --python-index or NEKRO_PYTHON_INDEX to an index URL or a wheel directory"
	if r.Code != 0 || !strings.Contains(r.Stdout, "PIP 1") || !strings.Contains(r.Stdout, want) {
		t.Fatalf("want %q: %+v", want, r)
	}
}

// Installed packages live on the chat's shared volume: a chat whose
// --shared-quota they do not fit gets an error naming the flag, and
// nothing half-installed.
func TestPipInstallCountsAgainstTheSharedQuota(t *testing.T) {
	data := testutil.DataDir(t)
	wheels := wheelDir(t, data, "nekrobigpkg", 8<<20)
	r := execIn(t, data, "alpha", `
import subprocess, os
done = subprocess.run(["pip", "install", "nekrobigpkg"], capture_output=True, text=True)
print("PIP", done.returncode, done.stdout, done.stderr)
print("LAYER", sorted(os.listdir("/app/shared/.packages")))
`, "--python-index", wheels, "--shared-quota", "4MiB")
	if r.Code != 0 || !strings.Contains(r.Stdout, "PIP 1") || !strings.Contains(r.Stdout, "--shared-quota") ||
		!strings.Contains(r.Stdout, "LAYER []") || strings.Contains(r.Stdout, "Successfully installed") {
		t.Fatalf("want a full-disk error naming --shared-quota and an empty layer: %+v", r)
	}
}

// A chat's warm zygote, started before the install, serves runs that
// import what an earlier run installed (its import caches are reset per
// run), and runs from it install as fresh runs do. They see the layer
// read-only, as fresh runs do (only the installer writes it), and pip
// uninstall goes through the installer too.
func TestPipPackagesReachZygoteRuns(t *testing.T) {
	data := testutil.DataDir(t)
	wheels := wheelDir(t, data, "nekrotestpkg", 0)
	rt, err := openRuntime(t, app.Config{DataDir: data, Sandbox: app.SandboxConfig{Zygotes: 2},
		Host:    host.Config{Plugins: []*plugin.Plugin{testPlugin()}},
		Runtime: runtime.Config{WarmSpares: true, PythonIndex: wheels}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	zygoteRun(t, rt, "pass") // the chat's zygote is up before anything is installed
	res := zygoteRun(t, rt, `
import subprocess
print("PIP", subprocess.run(["pip", "install", "nekrotestpkg"]).returncode)
import nekrotestpkg
print("VALUE", nekrotestpkg.VALUE)
`)
	if !strings.Contains(res.Output, "PIP 0") || !strings.Contains(res.Output, "VALUE 42") {
		t.Fatalf("install in a zygote run: %s %q", res.StopType, res.Output)
	}
	res = zygoteRun(t, rt, "import nekrotestpkg\nprint('AGAIN', nekrotestpkg.VALUE)\n")
	if !strings.Contains(res.Output, "AGAIN 42") {
		t.Fatalf("the next zygote run: %s %q", res.StopType, res.Output)
	}
	res = zygoteRun(t, rt, `
import errno, nekrotestpkg, os
for path in (nekrotestpkg.__file__, "/app/shared/.packages/planted.py"):
    try:
        open(path, "a").write("print('PLANTED')\n")
        print("WROTE", path)
    except OSError as e:
        print("REFUSED", errno.errorcode[e.errno])
try:
    os.rename("/app/shared/.packages", "/app/shared/moved")
    print("MOVED")
except OSError as e:
    print("REFUSED", errno.errorcode[e.errno])
`)
	if strings.Contains(res.Output, "WROTE") || strings.Contains(res.Output, "MOVED") ||
		strings.Count(res.Output, "REFUSED EROFS") != 2 || !strings.Contains(res.Output, "REFUSED EBUSY") {
		t.Fatalf("a zygote run wrote the package layer: %s %q", res.StopType, res.Output)
	}
	res = zygoteRun(t, rt, `
import subprocess
print("UNINSTALL", subprocess.run(["pip", "uninstall", "-y", "nekrotestpkg"]).returncode)
`)
	if !strings.Contains(res.Output, "UNINSTALL 0") || !strings.Contains(res.Output, "Successfully uninstalled nekrotestpkg-1.0") {
		t.Fatalf("pip uninstall in a zygote run: %s %q", res.StopType, res.Output)
	}
	res = zygoteRun(t, rt, "import nekrotestpkg\n")
	if !strings.Contains(res.Output, "No module named 'nekrotestpkg'") {
		t.Fatalf("the package is still there after pip uninstall: %s %q", res.StopType, res.Output)
	}
}

// The prompt tells the AI it can pip install exactly when an index is set.
func TestPromptSaysWhetherPipInstallWorks(t *testing.T) {
	data := testutil.DataDir(t)
	r := testutil.RunNekro(t, nil, "--data", data, "chats", "prompt", "c")
	if r.Code != 0 || !strings.Contains(r.Stdout, "pip install is not available (the operator configured no package index)") {
		t.Fatalf("without an index: %+v", r)
	}
	r = testutil.RunNekro(t, nil, "--data", data, "chats", "prompt", "c", "--python-index", wheelDir(t, data, "nekrotestpkg", 0))
	if r.Code != 0 || !strings.Contains(r.Stdout, "`pip install NAME`") || !strings.Contains(r.Stdout, "/app/shared/.packages") {
		t.Fatalf("with an index: %+v", r)
	}
}
