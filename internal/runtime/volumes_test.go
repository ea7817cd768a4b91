package runtime_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/host"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/testutil"
	"github.com/nekro-go/nekro/internal/volume"
	"github.com/nekro-go/nekro/plugin"
)

func openVolumes(t *testing.T, cfg runtime.Config) testRuntime {
	t.Helper()
	if err := volume.Available(); err != nil {
		t.Skip(err)
	}
	rt, err := openRuntime(t, app.Config{DataDir: testutil.DataDir(t), Host: host.Config{Plugins: []*plugin.Plugin{testPlugin()}},
		Runtime: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	return rt
}

func isMountPoint(dir string) bool {
	var a, b syscall.Stat_t
	if syscall.Stat(dir, &a) != nil || syscall.Stat(filepath.Dir(dir), &b) != nil {
		return false
	}
	return a.Dev != b.Dev
}

func sharedDir(rt testRuntime, chatKey string) string {
	return rt.Layout().SharedDir(files.ContainerKey(chatKey))
}

func runIn(t *testing.T, rt testRuntime, chatKey, code string) string {
	t.Helper()
	res, err := rt.Exec(context.Background(), runtime.ExecRequest{ChatKey: chatKey, Code: code})
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(res.Output)
}

// A chat's volumes are unmounted, their loop devices freed, once nothing
// of the chat has used them for the idle time; the chat's next run mounts
// them again with what they held.
func TestIdleChatVolumesAreUnmountedAndMountedAgain(t *testing.T) {
	rt := openVolumes(t, runtime.Config{VolumeIdle: 500 * time.Millisecond})
	runIn(t, rt, "chat-a", `open("/app/shared/kept.txt", "w").write("kept")`)
	dir := sharedDir(rt, "chat-a")
	if !isMountPoint(dir) {
		t.Fatal("the chat's shared directory is not a volume")
	}
	// Unmounted, then their loop devices freed once the run's sandbox
	// has gone; what stays is the plugins' data directories, a device each.
	uploads := rt.Layout().UploadsDir("chat-a")
	settled := func() bool {
		vols, loops := rt.MountedVolumes()
		return !isMountPoint(dir) && !isMountPoint(uploads) && loops == vols
	}
	deadline := time.Now().Add(20 * time.Second)
	for !settled() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if isMountPoint(dir) || isMountPoint(uploads) {
		t.Fatal("an idle chat's volumes stayed mounted")
	}
	if vols, loops := rt.MountedVolumes(); loops != vols {
		t.Errorf("%d loop devices known bound after the chat went idle, for %d volumes mounted", loops, vols)
	}
	if out := runIn(t, rt, "chat-a", `print(open("/app/shared/kept.txt").read())`); out != "kept" {
		t.Errorf("mounted again, the volume lost what it held: %q", out)
	}
}

// A run's volumes stay mounted while it runs, however long past the idle
// time.
func TestLiveRunKeepsItsVolumesMounted(t *testing.T) {
	rt := openVolumes(t, runtime.Config{VolumeIdle: 200 * time.Millisecond})
	dir := sharedDir(rt, "chat-a")
	var unmounted atomic.Bool
	started := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-started
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if !isMountPoint(dir) {
				unmounted.Store(true)
			}
		}
	}()
	go func() {
		for !isMountPoint(dir) {
			time.Sleep(5 * time.Millisecond)
		}
		close(started)
	}()
	out := runIn(t, rt, "chat-a", `
import time
time.sleep(1.5)
open("/app/shared/late.txt", "w").write("late")
print(open("/app/shared/late.txt").read())`)
	done <- struct{}{}
	if out != "late" {
		t.Fatalf("the run: %q", out)
	}
	if unmounted.Load() {
		t.Error("a chat's volume was unmounted while its run went on")
	}
}

// Past MaxVolumes, the volumes of the least recently used chat not in use
// go first; a chat in use keeps its own even when that exceeds the cap.
// (A chat has one volume, bound at its two directories.)
func TestVolumeCapUnmountsIdleChatsFirst(t *testing.T) {
	rt := openVolumes(t, runtime.Config{VolumeIdle: time.Hour, MaxVolumes: 1})
	runtime.SetVolumeGrace(rt.Runtime, 0)
	runIn(t, rt, "chat-a", `pass`)
	if !isMountPoint(sharedDir(rt, "chat-a")) {
		t.Fatal("chat-a's shared directory is not a volume")
	}
	// chat-b runs while chat-c holds its volumes with a live run.
	slow := make(chan string)
	go func() {
		res, err := rt.Exec(context.Background(), runtime.ExecRequest{ChatKey: "chat-c", Code: `
import time, os
while not os.path.exists("/app/shared/go"):
    time.sleep(0.02)
print("done")`})
		if err != nil {
			slow <- err.Error()
			return
		}
		slow <- strings.TrimSpace(res.Output)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !isMountPoint(sharedDir(rt, "chat-c")) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for isMountPoint(sharedDir(rt, "chat-a")) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // evicted just after chat-c's mount
	}
	if isMountPoint(sharedDir(rt, "chat-a")) {
		t.Error("chat-a, idle, kept its volumes past the cap")
	}
	runIn(t, rt, "chat-b", `pass`)
	if !isMountPoint(sharedDir(rt, "chat-c")) {
		t.Error("the cap unmounted the volumes of a chat with a live run")
	}
	if !isMountPoint(sharedDir(rt, "chat-b")) {
		t.Error("chat-b's volumes were unmounted by its own mount")
	}
	if err := osWrite(filepath.Join(sharedDir(rt, "chat-c"), "go")); err != nil {
		t.Fatal(err)
	}
	if out := <-slow; out != "done" {
		t.Errorf("chat-c's run: %q", out)
	}
}

func osWrite(name string) error { return os.WriteFile(name, nil, 0o644) }

// A chat's zygote has its directories mounted: its volumes stay mounted
// while it lives, past their idle time, though no run or spare holds them.
func TestZygoteKeepsItsChatsVolumesMounted(t *testing.T) {
	if err := volume.Available(); err != nil {
		t.Skip(err)
	}
	rt, err := openRuntime(t, app.Config{DataDir: testutil.DataDir(t), Sandbox: app.SandboxConfig{Zygotes: 2},
		Host:    host.Config{Plugins: []*plugin.Plugin{testPlugin()}},
		Runtime: runtime.Config{WarmSpares: true, VolumeIdle: 300 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	zygoteRun(t, rt, "pass")
	time.Sleep(time.Second) // the spare started after the run is in place
	rt.DropSpares()
	time.Sleep(2500 * time.Millisecond) // two sweeps past the idle time
	if !isMountPoint(sharedDir(rt, "zy")) {
		t.Error("the chat's volumes were unmounted while its zygote had them")
	}
}

// A new chat's two directories are one volume: one image and one
// filesystem, bound at each, with one quota for both. Its sandbox sees
// /app/shared writable and /app/uploads read-only, neither inside the
// other; once the code has filled the quota, an upload to the chat is
// refused as the disk being full.
func TestNewChatsDirectoriesAreOneVolume(t *testing.T) {
	rt := openVolumes(t, runtime.Config{SharedQuota: 16 << 20, VolumeIdle: time.Hour})
	ctx := context.Background()
	if _, err := files.SaveUpload(ctx, rt.Layout(), "chat-v", "photo.png", strings.NewReader("png")); err != nil {
		t.Fatal(err)
	}
	out := runIn(t, rt, "chat-v", `
import os
open("/app/shared/note.txt", "w").write("x")
try:
    open("/app/uploads/mine.txt", "w")
    print("uploads writable")
except OSError as e:
    print("uploads refused", e.errno)
print(sorted(n for n in os.listdir("/app/shared") if not n.startswith(".")), sorted(os.listdir("/app/uploads")))
try:
    with open("/app/shared/big", "wb") as f:
        for _ in range(32):
            f.write(b"\0" * (1 << 20))
    print("no quota")
except OSError as e:
    print("full", e.errno)`)
	want := "uploads refused 30\n['note.txt'] ['photo.png']\nfull 28"
	if out != want {
		t.Errorf("the run printed\n%s\nwant\n%s", out, want)
	}
	shared, uploads := sharedDir(rt, "chat-v"), rt.Layout().UploadsDir("chat-v")
	var a, b syscall.Stat_t
	if syscall.Stat(shared, &a) != nil || syscall.Stat(uploads, &b) != nil || a.Dev != b.Dev || !isMountPoint(shared) {
		t.Errorf("shared on device %d, uploads on %d (mounted %v): not one volume", a.Dev, b.Dev, isMountPoint(shared))
	}
	images := func(area string) []string {
		imgs, _ := filepath.Glob(filepath.Join(rt.Layout().VolumesDir(), area, "[0-9a-f]*.img"))
		return imgs
	}
	if len(images("chats")) != 1 || len(images("uploads")) != 0 || len(images("shared")) != 0 {
		t.Errorf("images: chats %v, uploads %v, shared %v; want the chat's one", images("chats"), images("uploads"), images("shared"))
	}
	if _, err := files.SaveUpload(ctx, rt.Layout(), "chat-v", "more.bin", strings.NewReader(strings.Repeat("x", 1<<20))); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("an upload to a chat whose code filled its quota: %v, want ENOSPC", err)
	}
}
