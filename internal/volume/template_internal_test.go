package volume

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// A new image is a sparse copy of one empty image made once per spec:
// the copies are the same filesystem as mkfs made, take no more of the
// host's disk than the template, and a spec with other options gets a
// template of its own.
func TestImagesAreSparseCopiesOfOneTemplate(t *testing.T) {
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("no mkfs.ext4")
	}
	dir := t.TempDir()
	m := NewManager()
	spec := Spec{Bytes: 64 << 20, Inodes: 4000}
	for _, name := range []string{"a.img", "b.img"} {
		if err := m.makeImage(context.Background(), filepath.Join(dir, name), spec); err != nil {
			t.Fatal(err)
		}
	}
	tmpls, _ := filepath.Glob(filepath.Join(dir, ".empty-*.img"))
	if len(tmpls) != 1 {
		t.Fatalf("templates: %v", tmpls)
	}
	want, err := os.ReadFile(tmpls[0])
	if err != nil {
		t.Fatal(err)
	}
	var tst syscall.Stat_t
	syscall.Stat(tmpls[0], &tst)
	for _, name := range []string{"a.img", "b.img"} {
		img := filepath.Join(dir, name)
		got, err := os.ReadFile(img)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the template", name)
		}
		var st syscall.Stat_t
		syscall.Stat(img, &st)
		if st.Size != spec.Bytes || st.Blocks > tst.Blocks+16 {
			t.Errorf("%s: %d bytes, %d blocks allocated (the template %d): not a sparse copy", name, st.Size, st.Blocks, tst.Blocks)
		}
		if out, err := exec.Command("e2fsck", "-fn", img).CombinedOutput(); err != nil {
			t.Errorf("e2fsck %s: %v\n%s", name, err, out)
		}
		sb, err := readSuperblock(img)
		if err != nil || sb.inodes < 3600 || sb.inodes > 4400 || sb.blocks*sb.blockSize != spec.Bytes {
			t.Errorf("%s: %+v %v", name, sb, err)
		}
	}
	if n, zeroed := inodeTablesZeroed(t, tmpls[0]); n == 0 || zeroed != n {
		t.Errorf("%d of the template's %d block groups have their inode table marked zeroed: each copy's first mount starts the kernel's lazy init, which writes them all", zeroed, n)
	}
	if err := m.makeImage(context.Background(), filepath.Join(dir, "j.img"), Spec{Bytes: 64 << 20, Inodes: 4000, Journal: true}); err != nil {
		t.Fatal(err)
	}
	if tmpls, _ := filepath.Glob(filepath.Join(dir, ".empty-*.img")); len(tmpls) != 2 {
		t.Errorf("a journalled spec shares the template: %v", tmpls)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.new")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

var groupLine = regexp.MustCompile(`^Group [0-9]+: `)

// inodeTablesZeroed returns how many block groups the image has and how
// many of them dumpe2fs shows with ITABLE_ZEROED.
func inodeTablesZeroed(t *testing.T, image string) (groups, zeroed int) {
	t.Helper()
	out, err := exec.Command("dumpe2fs", image).Output()
	if err != nil {
		t.Fatalf("dumpe2fs %s: %v", image, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if groupLine.MatchString(line) {
			groups++
			if strings.Contains(line, "ITABLE_ZEROED") {
				zeroed++
			}
		}
	}
	return groups, zeroed
}
