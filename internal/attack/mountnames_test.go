package attack_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/testutil"
	"github.com/nekro-go/nekro/internal/volume"
)

// A private chat's key carries the user's QQ number.
const (
	privateQQ   = "314159265"
	privateChat = "onebot_v11-private_" + privateQQ
)

func requireVolumes(t *testing.T) {
	t.Helper()
	requireRoot(t)
	if err := volume.Available(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI has volumes: %v", err)
		}
		t.Skipf("no volumes, so no mounts to read: %v", err)
	}
}

// mountsUnder returns the mount points below dir in the host's mount
// table, as any host user reads it.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

// What every host user can read about the running sandboxes: the mount
// table, the loop devices' backing files and the processes' command
// lines (but self's: the operator typed the chat key on it).
func worldReadable(t *testing.T, self int) string {
	t.Helper()
	var b bytes.Buffer
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	b.Write(mi)
	backing, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range backing {
		s, _ := os.ReadFile(f)
		b.Write(s)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		if f == filepath.Join("/proc", strconv.Itoa(self), "cmdline") {
			continue
		}
		s, _ := os.ReadFile(f)
		b.WriteString(f + ": " + string(bytes.ReplaceAll(s, []byte{0}, []byte{' '})) + "\n")
	}
	return b.String()
}

// The host's /proc/self/mountinfo is readable by every local user. A
// chat's /app/shared and /app/uploads are volumes mounted in the data
// directory; their mount points (and the images behind the loop devices,
// and bwrap's command line) must not name the chat, whose key holds a
// QQ number.
func TestHostMountTableNamesNoChat(t *testing.T) {
	requireVolumes(t)
	data := testutil.DataDir(t)
	cmd := exec.Command(testutil.NekroExamples(t), "exec", "--data", data, "--chat", privateChat, "--user", "u1", "-")
	cmd.Stdin = strings.NewReader(`import os, time
open("/app/shared/ready", "w").close()
deadline = time.time() + 200
while not os.path.exists("/app/shared/go") and time.time() < deadline:
    time.sleep(0.05)
print("released", os.path.exists("/app/shared/go"), sorted(os.listdir("/app/uploads")))
`)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd.WaitDelay = 10 * time.Second // a sandbox left behind holds stdout
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	})
	// Wait, while the code runs, until both of its volumes are mounted.
	var shared string
	for deadline := time.Now().Add(3 * time.Minute); shared == ""; {
		for _, m := range mountsUnder(t, filepath.Join(data, "sandboxes")) {
			if _, err := os.Stat(filepath.Join(m, "ready")); err == nil {
				shared = m
			}
		}
		select {
		case <-exited:
			t.Fatalf("nekro exec ended before its code was ready: %v\n%s\n%s", waitErr, out.String(), errb.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no mounted shared directory with the code's file under %s; mounts: %v", data, mountsUnder(t, data))
		}
	}
	if ms := mountsUnder(t, filepath.Join(data, "uploads")); len(ms) != 1 {
		t.Errorf("uploads mounts %v, want the chat's one", ms)
	}
	seen := worldReadable(t, cmd.Process.Pid)
	for _, secret := range []string{privateQQ, files.SanitizeChatKey(privateChat)} {
		if strings.Contains(seen, secret) {
			for _, line := range strings.Split(seen, "\n") {
				if strings.Contains(line, secret) {
					t.Errorf("a host user reads %q: %s", secret, line)
				}
			}
		}
	}
	if err := os.WriteFile(filepath.Join(shared, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil || !strings.Contains(out.String(), "released True []") {
			t.Fatalf("nekro exec: %v\n%s\n%s", waitErr, out.String(), errb.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("nekro exec did not end after its code was released")
	}
	// After it: whatever stays mounted names no chat either.
	for _, m := range mountsUnder(t, data) {
		if strings.Contains(m, privateQQ) {
			t.Errorf("left mounted: %s", m)
		}
	}
}

// A data directory of a version that named the chat's directories (and
// their volume images, one a directory) after its key keeps the chat's
// files: the next run finds them under the opaque names, still in their
// own volumes, and nothing is left under the old ones.
func TestChatFilesSurviveTheRenameOfTheirDirectories(t *testing.T) {
	data := testutil.DataDir(t)
	// The previous version's data directory: directories, and images
	// where volumes are made, named after the key; no name key.
	legacy := []struct{ area, name, image, file, text string }{
		{"uploads", files.SanitizeChatKey(privateChat), "uploads", "up.txt", "an upload from before"},
		{"sandboxes", files.ContainerKey(privateChat), "shared", "note.txt", "a note from before"},
	}
	for _, l := range legacy {
		dir := filepath.Join(data, l.area, l.name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		var v *volume.Volume
		if volume.Available() == nil {
			var err error
			v, err = volume.Acquire(t.Context(), filepath.Join(data, "volumes", l.image, l.name+".img"), dir,
				volume.Spec{Bytes: 1 << 30, Inodes: 100000, UID: -1, Mode: 0o700})
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, l.file), []byte(l.text), 0o644); err != nil {
			t.Fatal(err)
		}
		if v != nil {
			if err := v.Release(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ms := mountsUnder(t, data); len(ms) != 0 {
		t.Fatalf("volumes still mounted: %v", ms)
	}

	r := execCode(t, data, privateChat, `print(open("/app/shared/note.txt").read(), "|", open("/app/uploads/up.txt").read())`, nil, nil)
	if r.code != 0 || !strings.Contains(r.stdout, "a note from before | an upload from before") {
		t.Fatalf("the chat's files after the upgrade: %+v", r)
	}
	// The next run finds them too, and no name in the data directory
	// shows the chat's key.
	r = execCode(t, data, privateChat, `print(open("/app/shared/note.txt").read())`, nil, nil)
	if r.code != 0 || !strings.Contains(r.stdout, "a note from before") {
		t.Fatalf("second run: %+v", r)
	}
	filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), privateQQ) {
			t.Errorf("left under the chat's key: %s", path)
		}
		return nil
	})
	if fi, err := os.Stat(filepath.Join(data, files.NameKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("name key: %v %v, want mode 0600", fi, err)
	}
	// Its volumes stay one a directory: no volume for both was made
	// beside them (it would hide their files).
	if volume.Available() == nil {
		for _, area := range []string{"uploads", "shared"} {
			if imgs, _ := filepath.Glob(filepath.Join(data, "volumes", area, "[0-9a-f]*.img")); len(imgs) != 1 {
				t.Errorf("volumes/%s: %v, want the chat's renamed image", area, imgs)
			}
		}
		if imgs, _ := filepath.Glob(filepath.Join(data, "volumes", "chats", "[0-9a-f]*.img")); len(imgs) != 0 {
			t.Errorf("a volume for both directories beside the chat's own: %v", imgs)
		}
	}
}
