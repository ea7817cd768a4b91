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
// volume images) after its key keeps the chat's files: the next run finds
// them under the opaque names, and nothing is left under the old ones.
func TestChatFilesSurviveTheRenameOfTheirDirectories(t *testing.T) {
	data := testutil.DataDir(t)
	up := filepath.Join(t.TempDir(), "up.txt")
	if err := os.WriteFile(up, []byte("an upload from before"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := testutil.RunNekroExamples(t, nil, "--data", data, "chats", "send", privateChat, "--user", "u1", "--file", up, "hi"); r.Code != 0 {
		t.Fatalf("chats send: %+v", r)
	}
	if r := execCode(t, data, privateChat, `open("/app/shared/note.txt", "w").write("a note from before")`, nil, nil); r.code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	if ms := mountsUnder(t, data); len(ms) != 0 {
		t.Fatalf("volumes still mounted after nekro exec ended: %v", ms)
	}
	// Turn the data directory into the previous version's: directories
	// and images named after the key, and no name key.
	legacy := map[string]string{"uploads": files.SanitizeChatKey(privateChat), "sandboxes": files.ContainerKey(privateChat)}
	images := map[string]string{"uploads": "uploads", "sandboxes": "shared"}
	for area, old := range legacy {
		ents, err := os.ReadDir(filepath.Join(data, area))
		if err != nil || len(ents) != 1 {
			t.Fatalf("%s: %v %v", area, ents, err)
		}
		name := ents[0].Name()
		rename(t, filepath.Join(data, area, name), filepath.Join(data, area, old))
		img := filepath.Join(data, "volumes", images[area], name+".img")
		if _, err := os.Stat(img); err == nil {
			rename(t, img, filepath.Join(data, "volumes", images[area], old+".img"))
			os.Remove(img + ".lock")
		}
	}
	os.Remove(filepath.Join(data, files.NameKeyFile))

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
}

func rename(t *testing.T, from, to string) {
	t.Helper()
	if from == to {
		return // the version under test named it so already
	}
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}
