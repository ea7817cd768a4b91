package cli_test

import (
	"archive/zip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/testutil"
)

// pluginSource is a Python plugin package whose module name is module:
// its tool MODULE_hello() answers "MODULE says hi", and MODULE_keep()
// stores a value and writes a file in its data directory.
func pluginSource(module string) map[string]string {
	return map[string]string{"__init__.py": `from nekro_agent.api.plugin import NekroPlugin, SandboxMethodType
from nekro_agent.api.schemas import AgentCtx

plugin = NekroPlugin(name="` + module + `", module_name="` + module + `", description="installed in a test",
                     version="1", author="tester", url="https://example.org")


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "` + module + `_hello")
async def ` + module + `_hello(_ctx: AgentCtx) -> str:
    """Say hi."""
    return "` + module + ` says hi"


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "` + module + `_keep")
async def ` + module + `_keep(_ctx: AgentCtx) -> str:
    """Keep a value and a file."""
    await plugin.store.set(chat_key=_ctx.from_chat_key, store_key="kept", value="KEPT-VALUE")
    (plugin.get_plugin_data_dir() / "kept.txt").write_text("kept")
    return "kept"
`}
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// writeZip writes entries (name -> body) into a zip at path; a body
// starting with "->" makes a symbolic link to the rest.
func writeZip(t *testing.T, path string, entries [][2]string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	z := zip.NewWriter(f)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e[0], Method: zip.Deflate}
		body := e[1]
		if target, ok := strings.CutPrefix(body, "->"); ok {
			h.SetMode(os.ModeSymlink | 0o777)
			body = target
		} else {
			h.SetMode(0o644)
		}
		w, err := z.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.email=t@example.org", "-c", "user.name=t",
		"-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// nekro plugins install places a plugin from a directory, a zip (with a
// repository archive's top directory) and a git repository (a file://
// URL and a local path) into data/plugins-py/, where nekro finds it with
// no --plugin-dir; remove --purge takes its files, its KV values and its
// data directory; remove by default keeps the data.
func TestPluginsInstallFromDirectoryZipAndGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	data, src := testutil.DataDir(t), t.TempDir()
	dirSrc := filepath.Join(src, "fromdir")
	writeTree(t, dirSrc, pluginSource("fromdir"))
	zipPath := filepath.Join(src, "fromzip.zip")
	var entries [][2]string
	for name, body := range pluginSource("fromzip") {
		entries = append(entries, [2]string{"fromzip-main/" + name, body})
	}
	writeZip(t, zipPath, entries)
	repo := filepath.Join(src, "nekro-plugin-fromgit")
	writeTree(t, repo, pluginSource("fromgit"))
	git(t, repo, "init", "-q")
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-q", "-m", "plugin")

	nekro := func(args ...string) testutil.Result {
		return testutil.RunNekro(t, nil, append([]string{args[0], args[1], "--data", data}, args[2:]...)...)
	}
	for _, src := range []string{dirSrc, zipPath, "file://" + repo} {
		if r := nekro("plugins", "install", src); r.Code != 0 || !strings.Contains(r.Stdout, "installed tester.") {
			t.Fatalf("install %s: %+v", src, r)
		}
	}
	installed := filepath.Join(data, "plugins-py")
	for _, name := range []string{"fromdir", "fromzip", "nekro_plugin_fromgit"} {
		if _, err := os.Stat(filepath.Join(installed, name, "__init__.py")); err != nil {
			t.Errorf("%s not installed: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(installed, "nekro_plugin_fromgit", ".git")); err == nil {
		t.Error("the clone's .git was installed with the plugin")
	}
	if r := nekro("plugins", "install", dirSrc); r.Code == 0 || !strings.Contains(r.Stderr, "--force") {
		t.Errorf("installing over an installed plugin: want a refusal naming --force: %+v", r)
	}
	run := testutil.RunNekro(t, []byte("print(fromdir_hello(), '|', fromzip_hello(), '|', fromgit_hello(), '|', fromdir_keep())\n"),
		"exec", "--data", data, "--chat", "c1", "-")
	if run.Code != 0 || !strings.Contains(run.Stdout, "fromdir says hi | fromzip says hi | fromgit says hi | kept") {
		t.Fatalf("the installed plugins do not answer: %+v", run)
	}

	// Removed by name, the git plugin comes back from the local path.
	if r := nekro("plugins", "remove", "nekro_plugin_fromgit"); r.Code != 0 {
		t.Fatalf("remove: %+v", r)
	}
	if r := nekro("plugins", "install", repo, "--name", "fromgit"); r.Code != 0 {
		t.Fatalf("install from a local repository path: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(installed, "fromgit", "__init__.py")); err != nil {
		t.Errorf("not installed from the local path: %v", err)
	}

	// remove keeps the data by default; --purge erases it.
	// The data directory is a volume (its image) when nekro runs as root.
	dataDir := filepath.Join(data, "plugins", "tester.fromdir")
	image := filepath.Join(data, "volumes", "plugins", "tester.fromdir.img")
	_, errFile := os.Stat(filepath.Join(dataDir, "kept.txt"))
	_, errImage := os.Stat(image)
	if errFile != nil && errImage != nil {
		t.Fatalf("the plugin's data directory holds nothing: %v; %v", errFile, errImage)
	}
	if r := nekro("kv", "get", "--plugin", "tester.fromdir", "--chat", "c1", "kept"); !strings.Contains(r.Stdout, "KEPT-VALUE") {
		t.Fatalf("the plugin's value is not stored: %+v", r)
	}
	if r := nekro("plugins", "remove", "tester.fromdir", "--purge"); r.Code != 0 || !strings.Contains(r.Stdout, "purged tester.fromdir") {
		t.Fatalf("remove --purge: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(installed, "fromdir")); err == nil {
		t.Error("remove left the plugin's files")
	}
	if _, err := os.Stat(dataDir); err == nil {
		t.Errorf("remove --purge left the data directory %s", dataDir)
	}
	if _, err := os.Stat(image); err == nil {
		t.Errorf("remove --purge left the data directory's volume %s", image)
	}
	if r := nekro("kv", "get", "--plugin", "tester.fromdir", "--chat", "c1", "kept"); strings.Contains(r.Stdout, "KEPT-VALUE") {
		t.Errorf("remove --purge left the plugin's KV values: %+v", r)
	}
	if r := nekro("plugins", "remove", "fromzip"); r.Code != 0 || !strings.Contains(r.Stdout, "kept (--purge erases them)") {
		t.Errorf("remove without a flag: want the data kept and said so: %+v", r)
	}
}

// Hostile archives and names are refused and write nothing outside the
// plugin directory: a zip entry with "..", one with an absolute path, a
// symbolic link, and a name that is not an identifier.
func TestPluginsInstallRefusesHostileSources(t *testing.T) {
	data, src := testutil.DataDir(t), t.TempDir()
	ok := pluginSource("hostile")["__init__.py"]
	cases := map[string][][2]string{
		"dotdot.zip":   {{"__init__.py", ok}, {"../escaped.py", "print('escaped')\n"}},
		"absolute.zip": {{"__init__.py", ok}, {"/tmp/nekro-absolute-escape.py", "x = 1\n"}},
		"link.zip":     {{"__init__.py", ok}, {"passwd", "->/etc/passwd"}},
	}
	for name, entries := range cases {
		p := filepath.Join(src, name)
		writeZip(t, p, entries)
		r := testutil.RunNekro(t, nil, "plugins", "install", "--data", data, p)
		if r.Code == 0 || !strings.Contains(r.Stderr, "refused") {
			t.Errorf("%s: want a refusal: %+v", name, r)
		}
	}
	for _, escaped := range []string{filepath.Join(data, "escaped.py"), filepath.Join(data, "plugins-py", "..", "escaped.py"),
		"/tmp/nekro-absolute-escape.py"} {
		if _, err := os.Stat(escaped); err == nil {
			t.Errorf("%s was written", escaped)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(data, "plugins-py")); len(ents) > 0 {
		t.Errorf("refused installs left %v", ents)
	}
	dir := filepath.Join(src, "fine")
	writeTree(t, dir, pluginSource("hostile"))
	if r := testutil.RunNekro(t, nil, "plugins", "install", "--data", data, dir, "--name", "../up"); r.Code == 0 {
		t.Errorf("a name with ../ was accepted: %+v", r)
	}
	os.Symlink("/etc/passwd", filepath.Join(dir, "passwd"))
	if r := testutil.RunNekro(t, nil, "plugins", "install", "--data", data, dir); r.Code == 0 || !strings.Contains(r.Stderr, "symbolic link") {
		t.Errorf("a directory with a symbolic link: want a refusal: %+v", r)
	}
}
