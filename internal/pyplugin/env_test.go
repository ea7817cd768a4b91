package pyplugin_test

import (
	"archive/zip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/testutil"
)

// writeVersionWheel writes a pure-Python wheel of pkg at version into
// dir: a module whose VERSION is the version, and the dist-info a wheel
// needs (METADATA, WHEEL, RECORD).
func writeVersionWheel(t *testing.T, dir, pkg, version string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, pkg+"-"+version+"-py3-none-any.whl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z := zip.NewWriter(f)
	info := pkg + "-" + version + ".dist-info/"
	files := [][2]string{
		{pkg + "/__init__.py", "VERSION = " + `"` + version + `"` + "\n"},
		{info + "METADATA", "Metadata-Version: 2.1\nName: " + pkg + "\nVersion: " + version + "\n"},
		{info + "WHEEL", "Wheel-Version: 1.0\nGenerator: nekro-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	record := ""
	for _, fb := range files {
		w, _ := z.Create(fb[0])
		w.Write([]byte(fb[1]))
		record += fb[0] + ",,\n"
	}
	w, _ := z.Create(info + "RECORD")
	w.Write([]byte(record + info + "RECORD,,\n"))
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
}

// writeVersionPlugin writes a package plugin NAME into dir whose tool
// NAME_version() answers the VERSION of conflictpkg it imports (with
// importLine), with extra files (its requirements) beside its
// __init__.py.
func writeVersionPlugin(t *testing.T, dir, name, importLine string, extra map[string]string) {
	t.Helper()
	pdir := filepath.Join(dir, name)
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := `from nekro_agent.api.plugin import NekroPlugin, SandboxMethodType, dynamic_import_pkg
from nekro_agent.api.schemas import AgentCtx

` + importLine + `

plugin = NekroPlugin(name="` + name + `", module_name="` + name + `", description="needs conflictpkg",
                     version="1", author="tester", url="https://example.org")


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "` + name + `_version")
async def ` + name + `_version(_ctx: AgentCtx) -> str:
    """The version of conflictpkg this plugin sees."""
    return conflictpkg.VERSION
`
	files := map[string]string{"__init__.py": src}
	for k, v := range extra {
		files[k] = v
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(pdir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Two plugins that need two versions of one package work side by side:
// each gets its own environment from the operator's wheel directory (one
// declares it in requirements.txt, the other in pyproject.toml, a third
// asks dynamic_import_pkg at import), the
// system Python gets neither, the environments are reused at the next
// start, nekro-agent (which real plugins declare) is nekro's own
// embedded package, never installed, and a requirement the index cannot satisfy is reported with the
// plugin and the package named while the other plugin still works.
func TestConflictingRequirementsSideBySide(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import conflictpkg").Run(); err == nil {
		t.Skip("the system Python has a conflictpkg: the test could not tell whose it sees")
	}
	wheels, plugins := t.TempDir(), t.TempDir()
	writeVersionWheel(t, wheels, "conflictpkg", "1.0")
	writeVersionWheel(t, wheels, "conflictpkg", "2.0")
	writeVersionPlugin(t, plugins, "conflict_a", "import conflictpkg", map[string]string{"requirements.txt": "# A's\nconflictpkg==1.0\nNekro_Agent\n"})
	writeVersionPlugin(t, plugins, "conflict_b", "import conflictpkg", map[string]string{"pyproject.toml": `[project]
name = "conflict-b"
version = "1"
dependencies = ["conflictpkg==2.0", "nekro-agent>=2.0.0"]
`})
	writeVersionPlugin(t, plugins, "conflict_c", `conflictpkg = dynamic_import_pkg("conflictpkg==1.0")`, nil)
	data := testutil.DataDir(t)
	run := func() testutil.Result {
		return testutil.RunNekro(t, []byte("print('A', conflict_a_version(), 'B', conflict_b_version(), 'C', conflict_c_version())\n"),
			"exec", "--data", data, "--plugin-dir", plugins, "--python-index", wheels, "--chat", "c1", "-")
	}
	r := run()
	if r.Code != 0 || !strings.Contains(r.Stdout, "A 1.0 B 2.0 C 1.0") {
		t.Fatalf("want each plugin's own version: %+v", r)
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import conflictpkg").Run(); err == nil {
		t.Fatal("conflictpkg reached the system Python")
	}
	records, _ := filepath.Glob(filepath.Join(data, "python", "envs", "*", "nekro-env.json"))
	if len(records) != 2 {
		t.Fatalf("want two environments with requirement records, got %v", records)
	}
	before := map[string]int64{}
	for _, f := range records {
		st, _ := os.Stat(f)
		before[f] = st.ModTime().UnixNano()
	}

	// Reused: the same answer with no index at all, nothing installed again.
	r = testutil.RunNekro(t, []byte("print('A', conflict_a_version(), 'B', conflict_b_version(), 'C', conflict_c_version())\n"),
		"exec", "--data", data, "--plugin-dir", plugins, "--chat", "c1", "-")
	if r.Code != 0 || !strings.Contains(r.Stdout, "A 1.0 B 2.0 C 1.0") {
		t.Fatalf("second start, without the index: %+v", r)
	}
	for _, f := range records {
		if st, _ := os.Stat(f); st.ModTime().UnixNano() != before[f] {
			t.Errorf("%s was written again: the environment was not reused", f)
		}
	}

	// Changed requirements are installed again; one the index cannot
	// satisfy fails that plugin alone, naming it and the package.
	os.WriteFile(filepath.Join(plugins, "conflict_a", "requirements.txt"), []byte("conflictpkg==3.0\n"), 0o644)
	r = testutil.RunNekro(t, nil, "plugins", "--data", data, "--plugin-dir", plugins, "--python-index", wheels)
	if r.Code == 0 {
		t.Fatalf("nekro plugins exited 0 with a plugin whose requirement is missing:\n%s", r.Stdout)
	}
	i := strings.Index(r.Stdout, "not loaded (1):")
	if i < 0 || !strings.Contains(r.Stdout[:i], "tester.conflict_b") {
		t.Fatalf("want conflict_b loaded and conflict_a listed as not loaded:\n%s", r.Stdout)
	}
	for _, w := range []string{"conflict_a", "conflictpkg==3.0", "RequirementError", "versions there: 1.0, 2.0"} {
		if !strings.Contains(r.Stdout[i:], w) {
			t.Errorf("the failure does not name %q:\n%s", w, r.Stdout[i:])
		}
	}

	// Requirements that conflict with each other are reported as such.
	os.WriteFile(filepath.Join(plugins, "conflict_a", "requirements.txt"), []byte("conflictpkg==1.0\nconflictpkg==2.0\n"), 0o644)
	r = testutil.RunNekro(t, nil, "plugins", "--data", data, "--plugin-dir", plugins, "--python-index", wheels)
	if r.Code == 0 || !strings.Contains(r.Stdout, "requirements conflict") || !strings.Contains(r.Stdout, "conflictpkg==2.0") {
		t.Fatalf("want the conflict reported:\n%s\n%s", r.Stdout, r.Stderr)
	}
}
