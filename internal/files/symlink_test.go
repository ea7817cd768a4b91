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
	"time"

	"github.com/nekro-go/nekro/plugin"
)

// plantedLinks are symlinks sandboxed code can create in /app/shared, each
// aimed out of it. The targets are relative to the shared directory, as
// the sandbox would write them, or absolute.
func plantLinks(t *testing.T, fsys *FS, l Layout, decoy string) map[string]string {
	t.Helper()
	other, err := NewFS(l, plugin.RunInfo{ChatKey: "other-chat"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(other.UploadPath(), "secret.txt"), "other chat's secret")
	writeFile(t, filepath.Join(l.PluginDir("alice.notes"), "token.txt"), "plugin token")
	writeFile(t, filepath.Join(l.Root, "nekro.db"), "database")
	shared := fsys.SharedPath()
	rel := func(target string) string {
		r, err := filepath.Rel(shared, target)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	links := map[string]string{
		"passwd":       "/etc/passwd",
		"passwd_rel":   strings.Repeat("../", 30) + "etc/passwd",
		"decoy":        decoy, // a writable file outside, to catch writes
		"decoy_rel":    rel(decoy),
		"other_upload": rel(filepath.Join(other.UploadPath(), "secret.txt")),
		"data_dir":     "../..",
		"database":     "../../nekro.db",
		"plugin_token": rel(filepath.Join(l.PluginDir("alice.notes"), "token.txt")),
		"etc_dir":      "/etc",
		"up_dir":       "..",
		"chain1":       "chain2",
		"chain2":       "chain3",
		"chain3":       "decoy_rel",
		"sandbox_abs":  "/app/shared/real.txt", // absolute in the sandbox's view
		"loop":         "loop",
		"dangling_out": "../../plugins/alice.notes/planted.txt",
		"via_missing":  "nope/../../decoy_in_data",
	}
	writeFile(t, filepath.Join(l.Root, "sandboxes", "decoy_in_data"), "data-dir decoy")
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(shared, name)); err != nil {
			t.Fatal(err)
		}
	}
	// A symlinked directory inside a real directory.
	if err := os.Mkdir(filepath.Join(shared, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../uploads", filepath.Join(shared, "sub", "all_uploads")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(shared, "real.txt"), "real")
	if err := os.Symlink("real.txt", filepath.Join(shared, "good_link")); err != nil {
		t.Fatal(err)
	}
	return links
}

// hostileTargets are the sandbox paths, through planted links, that must be
// refused by every access.
var hostileTargets = []string{
	"/app/shared/passwd",
	"/app/shared/passwd_rel",
	"/app/shared/decoy",
	"/app/shared/decoy_rel",
	"/app/shared/other_upload",
	"/app/shared/data_dir/nekro.db",
	"/app/shared/database",
	"/app/shared/plugin_token",
	"/app/shared/etc_dir/passwd",
	"/app/shared/up_dir/decoy_in_data",
	"/app/shared/chain1",
	"/app/shared/sandbox_abs",
	"/app/shared/sub/all_uploads/" + SanitizeChatKey("other-chat") + "/secret.txt",
	"/app/shared/dangling_out",
	"/app/shared/via_missing",
}

func TestPlantedSymlinksAreRefused(t *testing.T) {
	fsys, l := newTestFS(t, "chat-1", Options{})
	decoy := filepath.Join(t.TempDir(), "decoy.txt")
	writeFile(t, decoy, "outside")
	plantLinks(t, fsys, l, decoy)
	ctx := context.Background()
	fsys = fsys.ForPlugin("alice.notes").(*FS)

	for _, p := range hostileTargets {
		if host, err := fsys.GetFile(p); err == nil {
			t.Errorf("GetFile(%q) = %q; want a refusal", p, host)
		} else if !errors.Is(err, plugin.ErrPathRefused) {
			t.Errorf("GetFile(%q): %v does not wrap ErrPathRefused", p, err)
		}
		if b, err := fsys.ReadFile(p); err == nil {
			t.Errorf("ReadFile(%q) read %q; want a refusal", p, b)
		} else if !errors.Is(err, plugin.ErrPathRefused) && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ReadFile(%q): %v is neither a refusal nor not-found", p, err)
		}
		if f, err := fsys.Open(p); err == nil {
			b, _ := io.ReadAll(f)
			f.Close()
			t.Errorf("Open(%q) opened %q; want a refusal", p, b)
		}
		if f, err := fsys.Create(p); err == nil {
			f.Close()
			t.Errorf("Create(%q) succeeded; want a refusal", p)
		}
		host := filepath.Join(fsys.SharedPath(), strings.TrimPrefix(p, "/app/shared/"))
		if sp, err := fsys.ForwardFile(host); err == nil {
			t.Errorf("ForwardFile(%q) = %q; want a refusal", host, sp)
		}
		if sp, err := fsys.MixedForwardFile(ctx, host, "copy.txt"); err == nil {
			t.Errorf("MixedForwardFile(%q) = %q; want a refusal", host, sp)
		}
	}
	if _, err := fsys.ReadFile("/app/shared/loop"); err == nil {
		t.Error("ReadFile of a symlink loop succeeded")
	}

	// Nothing outside changed or appeared.
	if b, _ := os.ReadFile(decoy); string(b) != "outside" {
		t.Errorf("decoy outside the root now holds %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(l.Root, "sandboxes", "decoy_in_data")); string(b) != "data-dir decoy" {
		t.Errorf("data-dir decoy now holds %q", b)
	}
	if _, err := os.Lstat(filepath.Join(l.PluginDir("alice.notes"), "planted.txt")); err == nil {
		t.Error("a create through a dangling symlink landed in the plugin's data dir")
	}

	// Links that stay inside keep working.
	if b, err := fsys.ReadFile("/app/shared/good_link"); err != nil || string(b) != "real" {
		t.Errorf("ReadFile(good_link) = %q, %v", b, err)
	}
	if host, err := fsys.GetFile("/app/shared/good_link"); err != nil || host != filepath.Join(fsys.SharedPath(), "real.txt") {
		t.Errorf("GetFile(good_link) = %q, %v; want the resolved real.txt", host, err)
	}
}

// Forwarding a file under the name of a planted symlink replaces the link;
// it never writes through it.
func TestForwardReplacesPlantedLink(t *testing.T) {
	fsys, l := newTestFS(t, "chat-1", Options{})
	decoy := filepath.Join(t.TempDir(), "decoy.txt")
	writeFile(t, decoy, "outside")
	plantLinks(t, fsys, l, decoy)
	for _, name := range []string{"decoy", "decoy_rel", "chain1", "dangling_out"} {
		sp, err := fsys.MixedForwardFile(context.Background(), []byte("new content"), name)
		if err != nil || sp != "/app/shared/"+name {
			t.Fatalf("MixedForwardFile(bytes, %q) = %q, %v", name, sp, err)
		}
		fi, err := os.Lstat(filepath.Join(fsys.SharedPath(), name))
		if err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s is %v after forwarding, want a regular file", name, fi.Mode())
		}
	}
	if b, _ := os.ReadFile(decoy); string(b) != "outside" {
		t.Errorf("decoy outside the root now holds %q", b)
	}
	if _, err := os.Lstat(filepath.Join(l.PluginDir("alice.notes"), "planted.txt")); err == nil {
		t.Error("forwarding over a dangling symlink wrote into the plugin's data dir")
	}
}

// A symlink inside the plugin's own data directory cannot pull a host file
// into the sandbox either.
func TestForwardFromPluginDirRefusesEscapingLink(t *testing.T) {
	fsys, l := newTestFS(t, "chat-1", Options{})
	dir, err := l.EnsurePluginDir("alice.notes")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "exports", "ok.csv"), "a,b")
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "exports", "passwd.csv")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../uploads", filepath.Join(dir, "uploads_link")); err != nil {
		t.Fatal(err)
	}
	pfs := fsys.ForPlugin("alice.notes")
	ctx := context.Background()
	if sp, err := pfs.MixedForwardFile(ctx, filepath.Join(dir, "exports", "ok.csv"), ""); err != nil || sp != "/app/shared/ok.csv" {
		t.Fatalf("forward from plugin dir = %q, %v", sp, err)
	}
	for _, hp := range []string{
		filepath.Join(dir, "exports", "passwd.csv"),
		filepath.Join(dir, "uploads_link", SanitizeChatKey("chat-1"), "x"),
		filepath.Join(dir, "..", "bob.other", "token"),
		"/etc/passwd",
	} {
		if sp, err := pfs.MixedForwardFile(ctx, hp, ""); err == nil {
			t.Errorf("MixedForwardFile(%q) = %q; want a refusal", hp, sp)
		}
	}
	// Without a plugin bound, the plugin dir is not a source at all.
	if sp, err := fsys.MixedForwardFile(ctx, filepath.Join(dir, "exports", "ok.csv"), ""); err == nil {
		t.Errorf("unbound MixedForwardFile(plugin file) = %q; want a refusal", sp)
	}
}

// A FIFO planted in /app/shared is refused at once: opening it must not
// hang the plugin's call until someone opens the other end.
func TestPlantedFIFOIsRefusedWithoutBlocking(t *testing.T) {
	fsys, _ := newTestFS(t, "chat-1", Options{})
	if err := syscall.Mkfifo(filepath.Join(fsys.SharedPath(), "pipe"), 0o666); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if b, err := fsys.ReadFile("/app/shared/pipe"); err == nil {
			t.Errorf("ReadFile(fifo) = %q", b)
		}
		if f, err := fsys.Open("/app/shared/pipe"); err == nil {
			f.Close()
			t.Error("Open(fifo) succeeded")
		}
		if f, err := fsys.Create("/app/shared/pipe"); err == nil {
			f.Close()
			t.Error("Create(fifo) succeeded")
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a FIFO in /app/shared blocked the file bridge")
	}
}
