package files

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nekro-go/nekro/plugin"
)

// newTestFS returns a file bridge over a fresh data directory, with the
// chat's uploads and shared directories made as the runtime makes them.
func newTestFS(t *testing.T, chat string, opts Options) (*FS, Layout) {
	t.Helper()
	l := Layout{Root: t.TempDir()}
	fsys, err := NewFS(l, plugin.RunInfo{RunID: "r1", ChatKey: chat}, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{fsys.SharedPath(), fsys.UploadPath()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return fsys, l
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestNewFSKeys(t *testing.T) {
	l := Layout{Root: t.TempDir()}
	fsys, err := NewFS(l, plugin.RunInfo{ChatKey: "onebot-group_1:2"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fsys.ContainerKey(), ContainerKey("onebot-group_1:2"); got != want {
		t.Errorf("ContainerKey() = %q, want %q", got, want)
	}
	if got, want := fsys.SharedPath(), l.SharedDir(ContainerKey("onebot-group_1:2")); got != want || filepath.Dir(got) != filepath.Join(l.Root, "sandboxes") {
		t.Errorf("SharedPath() = %q, want %q", got, want)
	}
	if got, want := fsys.UploadPath(), l.UploadsDir("onebot-group_1:2"); got != want || filepath.Dir(got) != filepath.Join(l.Root, "uploads") {
		t.Errorf("UploadPath() = %q, want %q", got, want)
	}
	for _, ck := range []string{"..", ".", "a/b", "../../etc", ""} {
		if _, err := NewFS(l, plugin.RunInfo{ChatKey: "c", ContainerKey: ck}, Options{}); ck != "" && err == nil {
			t.Errorf("NewFS accepted container key %q", ck)
		}
	}
	if _, err := NewFS(l, plugin.RunInfo{ChatKey: ""}, Options{}); err == nil {
		t.Error("NewFS accepted an empty chat key")
	}
}

func TestReadWriteThroughSandboxPaths(t *testing.T) {
	fsys, _ := newTestFS(t, "chat-1", Options{})
	writeFile(t, filepath.Join(fsys.UploadPath(), "doc.txt"), "uploaded")
	writeFile(t, filepath.Join(fsys.SharedPath(), "sub", "made.txt"), "by the sandbox")

	for p, want := range map[string]string{
		"/app/uploads/doc.txt":        "uploaded",
		"uploads/doc.txt":             "uploaded",
		"/app/shared/sub/made.txt":    "by the sandbox",
		"./shared/sub/made.txt":       "by the sandbox",
		"/app//shared/./sub/made.txt": "by the sandbox",
	} {
		b, err := fsys.ReadFile(p)
		if err != nil || string(b) != want {
			t.Errorf("ReadFile(%q) = %q, %v; want %q", p, b, err, want)
		}
		f, err := fsys.Open(p)
		if err != nil {
			t.Errorf("Open(%q): %v", p, err)
			continue
		}
		b, _ = io.ReadAll(f)
		f.Close()
		if string(b) != want {
			t.Errorf("Open(%q) read %q, want %q", p, b, want)
		}
		host, err := fsys.GetFile(p)
		if err != nil {
			t.Errorf("GetFile(%q): %v", p, err)
			continue
		}
		if b, _ := os.ReadFile(host); string(b) != want {
			t.Errorf("GetFile(%q) = %q holding %q, want %q", p, host, b, want)
		}
	}

	// Create makes parents and the file shows up where the sandbox looks.
	w, err := fsys.Create("/app/shared/out/deep/report.md")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "# report")
	w.Close()
	if b, err := os.ReadFile(filepath.Join(fsys.SharedPath(), "out", "deep", "report.md")); err != nil || string(b) != "# report" {
		t.Fatalf("created file holds %q, %v", b, err)
	}
	sp, err := fsys.ForwardFile(filepath.Join(fsys.SharedPath(), "out", "deep", "report.md"))
	if err != nil || sp != "/app/shared/out/deep/report.md" {
		t.Fatalf("ForwardFile = %q, %v", sp, err)
	}
	sp, err = fsys.ForwardFile(filepath.Join(fsys.UploadPath(), "doc.txt"))
	if err != nil || sp != "/app/uploads/doc.txt" {
		t.Fatalf("ForwardFile(upload) = %q, %v", sp, err)
	}

	// A missing file is a plain not-found error naming the sandbox path only.
	_, err = fsys.ReadFile("/app/shared/nope.txt")
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, plugin.ErrPathRefused) {
		t.Errorf("ReadFile(missing) = %v; want not-exist", err)
	}
	if err != nil && strings.Contains(err.Error(), fsys.SharedPath()) {
		t.Errorf("error %q reveals the host path", err)
	}
	// GetFile of a file that does not exist yet still maps.
	host, err := fsys.GetFile("/app/shared/later/new.txt")
	if err != nil || host != filepath.Join(fsys.SharedPath(), "later", "new.txt") {
		t.Errorf("GetFile(new) = %q, %v", host, err)
	}
}

func TestForwardFileRefusals(t *testing.T) {
	fsys, l := newTestFS(t, "chat-1", Options{})
	other, err := NewFS(l, plugin.RunInfo{ChatKey: "chat-2"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(other.UploadPath(), "secret.txt"), "chat 2's")
	writeFile(t, filepath.Join(l.PluginDir("a.b"), "x.txt"), "plugin's")
	for _, hp := range []string{
		filepath.Join(other.UploadPath(), "secret.txt"),
		filepath.Join(l.PluginDir("a.b"), "x.txt"),
		"/etc/passwd",
		filepath.Join(fsys.SharedPath(), "..", other.ContainerKey(), "x"),
		filepath.Join(fsys.UploadPath(), "..", SanitizeChatKey("chat-2"), "secret.txt"),
		"shared/x.txt",
		"/app/shared/x.txt",
		filepath.Join(fsys.SharedPath(), "missing.txt"),
	} {
		if sp, err := fsys.ForwardFile(hp); err == nil {
			t.Errorf("ForwardFile(%q) = %q; want an error", hp, sp)
		}
	}
}

func TestCreateInSharedBelongsToSandboxUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to hand files to another user")
	}
	fsys, _ := newTestFS(t, "chat-1", Options{})
	if err := os.Chown(fsys.SharedPath(), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	w, err := fsys.Create("/app/shared/new/file.txt")
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	sp, err := fsys.MixedForwardFile(context.Background(), []byte("x"), "fwd.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"new", "new/file.txt", strings.TrimPrefix(sp, "/app/shared/")} {
		fi, err := os.Lstat(filepath.Join(fsys.SharedPath(), rel))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 || st.Gid != 65534 {
			t.Errorf("%s is owned by %d:%d, want the sandbox user 65534", rel, st.Uid, st.Gid)
		}
	}
	// Uploads stay the host's.
	w, err = fsys.Create("/app/uploads/report.txt")
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	fi, _ := os.Stat(filepath.Join(fsys.UploadPath(), "report.txt"))
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 {
		t.Errorf("upload is owned by %d, want root", st.Uid)
	}
}

func TestSeedHelpers(t *testing.T) {
	fsys, _ := newTestFS(t, "qq:group/1", Options{})
	host, err := fsys.UploadFilePath("report_1.txt")
	if err != nil || host != filepath.Join(fsys.UploadPath(), "report_1.txt") {
		t.Errorf("UploadFilePath = %q, %v", host, err)
	}
	host, err = fsys.UploadFilePath("../../../etc/cron.d/x")
	if err != nil || filepath.Dir(host) != fsys.UploadPath() {
		t.Errorf("UploadFilePath(hostile) = %q, %v; want a name inside the uploads dir", host, err)
	}
	sp, err := fsys.SandboxUploadPath("report_1.txt")
	if err != nil || sp != "/app/uploads/report_1.txt" {
		t.Errorf("SandboxUploadPath = %q, %v", sp, err)
	}
	if _, err := fsys.SandboxUploadPath(".."); err == nil {
		t.Error("SandboxUploadPath(\"..\") accepted")
	}
	if !plugin.IsURL("https://x.org/a") || !plugin.IsURL("http://x") || plugin.IsURL("httpfoo") || plugin.IsURL("/app/shared/x") {
		t.Error("IsURL misjudges")
	}
}

func TestEnsurePluginDir(t *testing.T) {
	l := Layout{Root: t.TempDir()}
	dir, err := l.EnsurePluginDir("alice.notes")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 || dir != filepath.Join(l.Root, "plugins", "alice.notes") {
		t.Fatalf("plugin dir %s: %v %v", dir, fi, err)
	}
	for _, key := range []string{"..", "alice", "../x.y", "a.b/c", "a.b.c", ".b", "a.", "a b.c"} {
		if _, err := l.EnsurePluginDir(key); err == nil {
			t.Errorf("EnsurePluginDir(%q) accepted", key)
		}
	}
	if err := os.Symlink("/tmp", filepath.Join(l.Root, "plugins", "evil.link")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.EnsurePluginDir("evil.link"); err == nil {
		t.Error("EnsurePluginDir followed a symlinked plugin dir")
	}
}

func TestImportUpload(t *testing.T) {
	l := Layout{Root: t.TempDir()}
	src := filepath.Join(t.TempDir(), "photo 1.png")
	writeFile(t, src, "png bytes")
	sp, err := ImportUpload(context.Background(), l, "chat:1", src)
	if err != nil || sp != "/app/uploads/photo 1.png" {
		t.Fatalf("ImportUpload = %q, %v", sp, err)
	}
	host := filepath.Join(l.UploadsDir("chat:1"), "photo 1.png")
	fi, err := os.Stat(host)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("upload %v, %v; want mode 0644", fi, err)
	}
	if b, _ := os.ReadFile(host); string(b) != "png bytes" {
		t.Fatalf("upload holds %q", b)
	}
	// A hostile name from a web upload stays one entry in the chat's dir.
	sp, err = SaveUpload(context.Background(), l, "chat:1", "../../../plugins/x.y/config.json", strings.NewReader("{}"))
	if err != nil || sp != "/app/uploads/.._.._.._plugins_x.y_config.json" {
		t.Fatalf("SaveUpload(hostile) = %q, %v", sp, err)
	}
	if _, err := os.Stat(filepath.Join(l.Root, "plugins")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("SaveUpload wrote outside the uploads dir: %v", err)
	}
	ents, _ := os.ReadDir(l.UploadsDir("chat:1"))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), partialPrefix) {
			t.Errorf("partial file %s left behind", e.Name())
		}
	}
}
