// Package testutil holds helpers shared by nekro's tests.
package testutil

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/volume"
)

// DataDir returns a fresh data directory path that the sandbox user can
// reach. t.TempDir's parents are mode 0700, which bwrap, started as the
// unprivileged sandbox uid, cannot traverse to bind-mount a chat's
// directories; this one lives in a 0711 directory removed after the test,
// with any volume a killed process left mounted beneath it.
func DataDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "nekro-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, m := range mountsBeneath(d) {
			unix.Unmount(m, unix.MNT_DETACH)
		}
		os.RemoveAll(d)
	})
	return filepath.Join(d, "data")
}

// mountsBeneath lists the mount points under dir, deepest first.
func mountsBeneath(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			out = append([]string{fields[4]}, out...)
		}
	}
	return out
}

// MountVolumes mounts, until the test ends, the volumes of data's chat and
// plugin directories. They are mounted only while a nekro process uses
// them; a test that looks at their files after `nekro exec` ended calls
// this first. Without volumes (not root) it does nothing.
func MountVolumes(t testing.TB, data string) {
	t.Helper()
	if volume.Available() != nil {
		return
	}
	l := files.Layout{Root: data}
	for _, image := range l.ChatVolumeImages() {
		binds, err := volume.SplitBinds(image)
		if err != nil {
			t.Fatal(err)
		}
		v, err := volume.NewManager().AcquireSplit(context.Background(), image, binds, volume.Spec{UID: -1})
		if err != nil {
			t.Fatalf("mount %s: %v", image, err)
		}
		t.Cleanup(func() { v.Release() })
	}
	for _, area := range []string{"uploads", "sandboxes", "plugins"} {
		dirs, _ := filepath.Glob(filepath.Join(data, area, "*"))
		for _, dir := range dirs {
			image, ok := l.VolumeImage(dir)
			if _, err := os.Stat(image); !ok || err != nil {
				continue
			}
			v, err := volume.Acquire(context.Background(), image, dir, volume.Spec{UID: -1})
			if err != nil {
				t.Fatalf("mount %s: %v", dir, err)
			}
			t.Cleanup(func() { v.Release() })
		}
	}
}
