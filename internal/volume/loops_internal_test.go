package volume

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

func needLoops(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI runs as root with loop devices: %v", err)
		}
		t.Skip(err)
	}
}

func acquireWith(t *testing.T, m *Manager, image, dir string) *Volume {
	t.Helper()
	v, err := m.Acquire(context.Background(), image, dir, Spec{Bytes: 8 << 20, Inodes: 100, UID: -1, Mode: 0o700})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Release() })
	return v
}

// A manager reads every loop device once, at its first mount, not on each
// mount: that read grows with the host's loop devices and was most of
// nekro's CPU under many chats.
func TestManagerReadsEveryLoopDeviceOnce(t *testing.T) {
	needLoops(t)
	base := t.TempDir()
	m := NewManager()
	for round := range 2 {
		for i := range 3 {
			img, dir := filepath.Join(base, strconv.Itoa(i)+".img"), filepath.Join(base, strconv.Itoa(i))
			v := acquireWith(t, m, img, dir)
			if err := os.WriteFile(filepath.Join(dir, "f"), []byte(strconv.Itoa(round)), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := v.Release(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if m.scans != 1 {
		t.Errorf("12 mounts read every loop device %d times, want once", m.scans)
	}
	if n := m.Bound(); n != 0 {
		t.Errorf("the manager still knows %d devices after every volume was released (autoclear frees them)", n)
	}
}

// An image still bound to a loop device (a lazily unmounted filesystem
// that something still holds) is mounted through that device, also when
// this manager did not bind it and its first read of every device came
// before: another process did, and recorded it in the image's lock file.
// A second device would make a second filesystem over the same image.
func TestManagerFindsTheDeviceAnotherProcessBound(t *testing.T) {
	needLoops(t)
	base := t.TempDir()
	img, dir := filepath.Join(base, "v.img"), filepath.Join(base, "v")
	other := NewManager()
	a := acquireWith(t, other, img, dir)
	f, err := os.Create(filepath.Join(dir, "open"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString("written while open")
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	dev := backingFile(other.loops[absPath(img)])
	if dev != absPath(img) {
		t.Fatalf("the device should stay bound while a file of it is open; its backing file is %q", dev)
	}

	m := NewManager()
	m.scanned = true // as if it had read every device before the other process bound one
	acquireWith(t, m, img, dir)
	if b, err := os.ReadFile(filepath.Join(dir, "open")); string(b) != "written while open" {
		t.Fatalf("a second filesystem over the image: %q %v", b, err)
	}
	f.WriteString("; and after")
	if b, _ := os.ReadFile(filepath.Join(dir, "open")); string(b) != "written while open; and after" {
		t.Errorf("a write through the old mount's open file does not show in the new one: %q", b)
	}
	if m.scans != 0 {
		t.Errorf("read every loop device %d times, want none", m.scans)
	}
}

// Many volumes mounted at once by one manager (a burst of new chats) each
// get a loop device of their own directly, without falling back to
// mount(8) because concurrent binds kept taking the same free device.
func TestConcurrentMountsBindTheirOwnDevices(t *testing.T) {
	needLoops(t)
	base := t.TempDir()
	m := NewManager()
	const n = 48
	errs := make(chan error, n)
	for i := range n {
		img, dir := filepath.Join(base, strconv.Itoa(i)+".img"), filepath.Join(base, strconv.Itoa(i))
		if err := m.makeImage(context.Background(), img, Spec{Bytes: 8 << 20, Inodes: 100}); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unmount(dir) })
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			img, dir := filepath.Join(base, strconv.Itoa(i)+".img"), filepath.Join(base, strconv.Itoa(i))
			errs <- m.mountLoop(img, dir, nil)
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
