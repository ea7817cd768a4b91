package bwrap

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/internal/sandbox/stub"
)

// templateUIDs is the range the template tests map; chats get uids from
// its start.
var templateUIDs = UIDRange{First: 1_000_000_000, Last: 1_000_999_999}

// templateRunner returns a runner whose fresh starts come from the
// template, and a data directory with one chat's directories in it,
// owned by uid.
func templateRunner(t *testing.T, uid int) (*Runner, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the sandbox template needs root")
	}
	data := t.TempDir()
	os.Chmod(filepath.Dir(data), 0o711) // as CheckMountSource asks of a data directory
	os.Chmod(data, 0o711)
	for _, d := range []string{"sandboxes", "uploads"} {
		if err := os.MkdirAll(filepath.Join(data, d, "c1"), 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(data, d), 0o711)
		os.Chown(filepath.Join(data, d, "c1"), uid, uid)
	}
	r := New("")
	r.Template, r.TemplateUIDs, r.DataDir = true, templateUIDs, data
	r.TemplateErr = func(err error) { t.Errorf("template: %v", err) }
	t.Cleanup(func() { r.Close() })
	return r, data
}

// templateSpec is a run of chat c1 as uid.
func templateSpec(t *testing.T, data string, uid int) sandbox.Spec {
	t.Helper()
	api, err := stub.APICaller(nil)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"boot.py": stub.Boot(), "api_caller.py": api, "chat_key": []byte("c1")}
	for n, b := range stub.PipShim() {
		files[n] = b
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fds[0])
	conn := os.NewFile(uintptr(fds[1]), "conn")
	t.Cleanup(func() { conn.Close() })
	return sandbox.Spec{Files: files, Conn: conn, SharedDir: filepath.Join(data, "sandboxes", "c1"),
		UploadsDir: filepath.Join(data, "uploads", "c1"), UID: uid, GID: uid,
		Limits: sandbox.Limits{Timeout: 20 * time.Second}}
}

// runSpec runs code in a sandbox of spec and returns its outcome.
func runSpec(t *testing.T, r *Runner, spec sandbox.Spec, code string) *sandbox.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := r.Start(ctx, spec)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	if err := p.Release(ctx, []byte(code)); err != nil {
		p.Kill()
		o, _ := p.Wait(ctx, time.Second)
		if r.tmpl != nil {
			t.Logf("template: %s", r.tmpl.stderr.String())
		}
		t.Fatalf("release: %v: %+v", err, o)
	}
	o, err := p.Wait(ctx, spec.Limits.WithDefaults().Timeout)
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	return o
}

func TestTemplateRuns(t *testing.T) {
	uid := templateUIDs.First + 5
	r, data := templateRunner(t, uid)
	o := runSpec(t, r, templateSpec(t, data, uid), `
import os, sys
print("uid", os.getuid(), os.getgid(), os.getgroups())
print("pids", sorted(p for p in os.listdir("/proc") if p.isdigit()))
print(open("/proc/self/status").read())
print(os.listdir("/app"), os.listdir("/app/.nekro"))
print(open("/proc/self/mountinfo").read())
print(os.environ)
sys.exit(3)
`)
	t.Logf("%+v\n%s", o, o.Output)
	if _, isT := interface{}(nil).(*tproc); isT {
		t.Log()
	}
	if !strings.Contains(o.Output, "uid 1000000005") || o.ExitCode != 3 {
		t.Fatalf("%+v", o)
	}
}
