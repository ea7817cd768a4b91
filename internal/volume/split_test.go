package volume_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nekro-go/nekro/internal/volume"
)

// A split volume is one filesystem shown at several directories: each
// bound directory is the chat's own (owner, mode), both share the quota,
// the mounts show no host path and keep nosuid, nodev and noatime, files
// of a plain directory move in, and the last release frees it all.
func TestSplitVolumeShowsOneFilesystemAtEachBind(t *testing.T) {
	need(t)
	base := t.TempDir()
	img := filepath.Join(base, "volumes", "chat.img")
	up, sh := filepath.Join(base, "uploads", "u1"), filepath.Join(base, "sandboxes", "s1")
	os.MkdirAll(up, 0o700)
	os.WriteFile(filepath.Join(up, "photo.png"), []byte("png"), 0o644) // from before volumes
	binds := []volume.Bind{{Dir: "shared", Mountpoint: sh}, {Dir: "uploads", Mountpoint: up}}
	spec := volume.Spec{Bytes: 16 << 20, Inodes: 500, UID: 4321, GID: 4321, Mode: 0o700}
	ctx := context.Background()
	v, err := volume.NewManager().AcquireSplit(ctx, img, binds, spec)
	if err != nil {
		t.Fatal(err)
	}
	var devs []uint64
	for _, dir := range []string{sh, up} {
		fi, err := os.Stat(dir)
		if err != nil || !isMount(dir) {
			t.Fatalf("%s: mounted %v, %v", dir, isMount(dir), err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != 4321 || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: owner %d mode %v", dir, st.Uid, fi.Mode().Perm())
		}
		devs = append(devs, st.Dev)
	}
	if devs[0] != devs[1] {
		t.Errorf("two filesystems: %v", devs)
	}
	if b, _ := os.ReadFile(filepath.Join(up, "photo.png")); string(b) != "png" {
		t.Errorf("the plain directory's file in the volume: %q", b)
	}
	if ents, _ := os.ReadDir(sh); len(ents) != 0 {
		t.Errorf("shared holds %v (the other directory, or lost+found)", ents)
	}
	// Bound through a mount of the image's root (files had to move in),
	// and later without one (fsmount): the same mounts either way.
	checkMounts := func(when string) {
		t.Helper()
		ms := mountsAt(t, sh, up)
		if len(ms) != 2 {
			t.Errorf("%s: mounts %v, want one at each directory", when, ms)
		}
		for _, m := range ms {
			if m.root != "/shared" && m.root != "/uploads" {
				t.Errorf("%s: %s shows root %q", when, m.point, m.root)
			}
			for _, opt := range []string{"nosuid", "nodev", "noatime"} {
				if !strings.Contains(","+m.opts+",", ","+opt+",") {
					t.Errorf("%s: %s: %s missing from %s", when, m.point, opt, m.opts)
				}
			}
		}
		if ms := mountsAt(t, img+".mnt"); len(ms) != 0 {
			t.Errorf("%s: the image's root is still mounted: %v", when, ms)
		}
	}
	checkMounts("first")
	// One quota for both: what shared takes, uploads cannot.
	f, _ := os.Create(filepath.Join(sh, "big"))
	chunk := make([]byte, 1<<20)
	for range 32 {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	if err := os.WriteFile(filepath.Join(up, "more"), chunk, 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("uploads past the shared quota: %v, want ENOSPC", err)
	}
	os.Remove(filepath.Join(sh, "big"))
	got, err := volume.SplitBinds(img)
	if err != nil || len(got) != 2 || got[0] != binds[0] || got[1] != binds[1] {
		t.Errorf("recorded binds %v, %v; want %v", got, err, binds)
	}

	if err := v.Release(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{sh, up} {
		if isMount(dir) {
			t.Errorf("%s still mounted after the last release", dir)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("the bare %s holds %v", dir, ents)
		}
	}
	if _, err := os.Stat(img + ".mnt"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("left %s.mnt: %v", img, err)
	}
	// Mounted again: the same files; and a second holder shares it.
	w, err := volume.NewManager().AcquireSplit(ctx, img, binds, spec)
	if err != nil {
		t.Fatal(err)
	}
	x, err := volume.NewManager().AcquireSplit(ctx, img, binds, spec)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(up, "photo.png")); string(b) != "png" {
		t.Errorf("after mounting again: %q", b)
	}
	checkMounts("again")
	w.Release()
	if !isMount(up) || !isMount(sh) {
		t.Error("the first release unmounted a volume still held")
	}
	if err := x.Destroy(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{img, img + ".lock"} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after Destroy: %s %v", p, err)
		}
	}
}

func TestSplitVolumeRefusesABadDirectoryName(t *testing.T) {
	for _, dir := range []string{"", ".", "..", "a/b"} {
		_, err := volume.NewManager().AcquireSplit(context.Background(), filepath.Join(t.TempDir(), "x.img"),
			[]volume.Bind{{Dir: dir, Mountpoint: t.TempDir()}}, volume.Spec{Bytes: 8 << 20, UID: -1})
		if err == nil {
			t.Errorf("%q accepted", dir)
		}
	}
}

type mountEntry struct{ point, root, opts string }

// mountsAt returns this process's mounts at the given mount points.
func mountsAt(t *testing.T, points ...string) []mountEntry {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []mountEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		for _, p := range points {
			if fields[4] == p {
				out = append(out, mountEntry{point: p, root: fields[3], opts: fields[5]})
			}
		}
	}
	return out
}

// A split volume's file count changed past a tenth is rebuilt, as a
// volume of one directory is: its directories' files are all there.
func TestSplitVolumeIsRebuiltToANewFileCount(t *testing.T) {
	need(t)
	base := t.TempDir()
	img := filepath.Join(base, "chat.img")
	a, b := filepath.Join(base, "a"), filepath.Join(base, "b")
	binds := []volume.Bind{{Dir: "a", Mountpoint: a}, {Dir: "b", Mountpoint: b}}
	spec := func(inodes int64) volume.Spec { return volume.Spec{Bytes: 16 << 20, Inodes: inodes, UID: -1} }
	v, err := volume.NewManager().AcquireSplit(context.Background(), img, binds, spec(1000))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(a, "in-a"), []byte("a"), 0o600)
	os.WriteFile(filepath.Join(b, "in-b"), []byte("b"), 0o600)
	v.Release()
	v, err = volume.NewManager().AcquireSplit(context.Background(), img, binds, spec(4000))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	u, err := v.Usage()
	if err != nil || u.InodesLimit < 3600 || u.InodesLimit > 4400 {
		t.Errorf("after the rebuild: %+v %v", u, err)
	}
	for dir, want := range map[string]string{filepath.Join(a, "in-a"): "a", filepath.Join(b, "in-b"): "b"} {
		if got, _ := os.ReadFile(dir); string(got) != want {
			t.Errorf("%s: %q", dir, got)
		}
	}
	if left, _ := filepath.Glob(img + ".*"); len(left) != 1 { // the lock file
		t.Errorf("left: %v", left)
	}
}
