package volume

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A split volume a killed process left half bound (one directory bound,
// the other not, the image's root still mounted where it mounts it for a
// moment, its lock gone with it) is set up again whole, and nothing of
// the old set-up stays mounted.
func TestSplitVolumeLeftHalfBoundIsBoundWhole(t *testing.T) {
	if err := Available(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI runs as root with loop devices: %v", err)
		}
		t.Skip(err)
	}
	base := t.TempDir()
	img := filepath.Join(base, "chat.img")
	a, b := filepath.Join(base, "a"), filepath.Join(base, "b")
	binds := []Bind{{Dir: "a", Mountpoint: a}, {Dir: "b", Mountpoint: b}}
	spec := Spec{Bytes: 8 << 20, UID: -1}
	v, err := NewManager().AcquireSplit(context.Background(), img, binds, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b, "f"), []byte("in b"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Unmount(b, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	at := img + ".mnt"
	if err := os.Mkdir(at, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(readRecord(v.lock), at, "ext4", 0, ""); err != nil {
		t.Fatal(err)
	}
	v.lock.Close() // killed: a stays bound, b does not
	w, err := NewManager().AcquireSplit(context.Background(), img, binds, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	ok, err := w.isMounted()
	if got, _ := os.ReadFile(filepath.Join(b, "f")); string(got) != "in b" || !ok {
		t.Errorf("b holds %q; both bound: %v %v", got, ok, err)
	}
	if _, err := os.Stat(at); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the image's root left at %s: %v", at, err)
	}
}
