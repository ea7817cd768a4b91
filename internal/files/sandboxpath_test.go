package files

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/plugin"
)

func TestParseSandboxPathAccepts(t *testing.T) {
	for _, tc := range []struct {
		in   string
		area Area
		rel  string
	}{
		{"/app/shared/out.txt", Shared, "out.txt"},
		{"/app/uploads/photo.png", Uploads, "photo.png"},
		{"/app/shared/a/b/c.txt", Shared, "a/b/c.txt"},
		{"/app/shared", Shared, "."},
		{"/app/shared/", Shared, "."},
		{"shared/x.png", Shared, "x.png"}, // relative to /app, as the prompt teaches
		{"./shared/x.png", Shared, "x.png"},
		{"uploads/doc.txt", Uploads, "doc.txt"},
		{"//app//shared//x", Shared, "x"},
		{"/app/./shared/./x", Shared, "x"},
		{"/app/shared/%2e%2e%2f%2e%2e%2fetc%2fpasswd", Shared, "%2e%2e%2f%2e%2e%2fetc%2fpasswd"}, // never decoded
		{"/app/shared/..\\..\\etc\\passwd", Shared, "..\\..\\etc\\passwd"},                       // one odd name
		{"/app/shared/...", Shared, "..."},
		{"/app/shared/.hidden", Shared, ".hidden"},
		{"/app/uploads/报告.txt", Uploads, "报告.txt"},
	} {
		a, rel, err := ParseSandboxPath(tc.in)
		if err != nil || a != tc.area || rel != tc.rel {
			t.Errorf("ParseSandboxPath(%q) = %v, %q, %v; want %v, %q", tc.in, a, rel, err, tc.area, tc.rel)
		}
	}
}

// hostilePaths are sandbox paths that must be refused.
var hostilePaths = []string{
	"",
	"..",
	"../etc/passwd",
	"/app/shared/..",
	"/app/shared/../../../etc/passwd",
	"/app/shared/../uploads/x", // would stay inside, refused all the same
	"/app/shared/a/..",
	"/app/shared/a/../../b",
	"/app/shared/a/b/../../../../etc/passwd",
	"/app/uploads/../../data/nekro.db",
	"/app/../app/shared/x",
	"/../app/shared/x",
	"shared/../../etc/passwd",
	"./shared/../../../root/.ssh/id_rsa",
	"/app/sharedX/..",
	"/app/sharedX/y",
	"/app/shared..",
	"/app/uploadsx/y",
	"/app/x.txt",
	"/app",
	"/",
	"x.txt",
	".",
	"/etc/passwd",
	"/proc/self/environ",
	"/tmp/shared/x",        // the reference matched "shared" anywhere
	"/app/foo/uploads/y",   // likewise
	"/data/uploads/chat/x", // a host path
	"app/../../etc/passwd",
	"/app/shared/x\x00.txt",
	"/app/shared/\x00",
	"/app/shared/" + strings.Repeat("a", 256),
	"/app/shared/" + strings.Repeat("a/", 2100),
	"/app/shared/\xff\xfe",
	"..//..//etc/passwd",
	"/app/shared//..//..//etc",
	"/app/shared/./../x",
	"http://example.com/x",
	"file:///etc/passwd",
	"~/x",
	"C:\\Windows\\win.ini",
}

func TestParseSandboxPathRefusesHostile(t *testing.T) {
	for _, p := range hostilePaths {
		a, rel, err := ParseSandboxPath(p)
		if err == nil {
			t.Errorf("ParseSandboxPath(%q) = %v, %q; want a refusal", p, a, rel)
			continue
		}
		if !errors.Is(err, plugin.ErrPathRefused) {
			t.Errorf("ParseSandboxPath(%q): error %v does not wrap ErrPathRefused", p, err)
		}
	}
}

func TestRefusalNamesAllowedPrefixes(t *testing.T) {
	_, _, err := ParseSandboxPath("/etc/passwd")
	if err == nil || !strings.Contains(err.Error(), "/app/shared/") || !strings.Contains(err.Error(), "/app/uploads/") {
		t.Fatalf("error %v should name /app/shared/ and /app/uploads/", err)
	}
	_, _, err = ParseSandboxPath("/app/shared/../x")
	if err == nil || !strings.Contains(err.Error(), `".."`) {
		t.Fatalf("error %v should say the path contains \"..\"", err)
	}
}

func TestSanitizeFileName(t *testing.T) {
	long := strings.Repeat("é", 200) + ".png" // 404 bytes
	for _, tc := range []struct{ in, want string }{
		{"report.md", "report.md"},
		{"../../etc/passwd", ".._.._etc_passwd"},
		{"a/b\\c", "a_b_c"},
		{"x\x00y", "x_y"},
		{"line\nbreak", "line_break"},
		{"...", "..."},
		{".env", ".env"},
		{"报告.txt", "报告.txt"},
		{"bad\xffutf8", "bad_utf8"},
	} {
		got, err := SanitizeFileName(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("SanitizeFileName(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	got, err := SanitizeFileName(long)
	if err != nil || len(got) > MaxNameLen || !strings.HasSuffix(got, ".png") || !strings.HasPrefix(got, "éé") {
		t.Errorf("SanitizeFileName(long) = %q (%d bytes), %v; want <= 255 bytes ending .png", got, len(got), err)
	}
	for _, bad := range []string{"", ".", ".."} {
		if got, err := SanitizeFileName(bad); !errors.Is(err, plugin.ErrPathRefused) {
			t.Errorf("SanitizeFileName(%q) = %q, %v; want a refusal", bad, got, err)
		}
	}
}

// FuzzSandboxPath checks the mapping against any input: a path is refused
// or maps to a host path beneath its area's directory, and mapping back
// gives the same sandbox location. Its seed corpus (the hostile table and
// testdata/fuzz) runs with every `go test`.
func FuzzSandboxPath(f *testing.F) {
	for _, p := range hostilePaths {
		f.Add(p)
	}
	for _, p := range []string{"/app/shared/x", "uploads/a/b", "/app/shared/", "shared/.x/../y"} {
		f.Add(p)
	}
	dir := f.TempDir()
	l := Layout{Root: dir}
	fsys, err := NewFS(l, plugin.RunInfo{ChatKey: "fuzz:chat"}, Options{})
	if err != nil {
		f.Fatal(err)
	}
	for _, d := range []string{fsys.SharedPath(), fsys.UploadPath()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, p string) {
		a, rel, err := ParseSandboxPath(p)
		if err != nil {
			if !errors.Is(err, plugin.ErrPathRefused) {
				t.Fatalf("ParseSandboxPath(%q): %v does not wrap ErrPathRefused", p, err)
			}
			if _, gerr := fsys.GetFile(p); gerr == nil {
				t.Fatalf("GetFile(%q) accepted a path ParseSandboxPath refused", p)
			}
			return
		}
		if rel != "." && !filepath.IsLocal(rel) {
			t.Fatalf("ParseSandboxPath(%q) rel %q is not local", p, rel)
		}
		host, err := fsys.GetFile(p)
		if err != nil {
			t.Fatalf("GetFile(%q): %v", p, err)
		}
		base := fsys.dir(a)
		r, err := filepath.Rel(base, host)
		if err != nil || (r != "." && !filepath.IsLocal(r)) {
			t.Fatalf("GetFile(%q) = %q, outside %q", p, host, base)
		}
		back := SandboxPath(a, rel)
		a2, rel2, err := ParseSandboxPath(back)
		if err != nil || a2 != a || rel2 != rel {
			t.Fatalf("round trip of %q via %q gave %v %q %v", p, back, a2, rel2, err)
		}
	})
}
