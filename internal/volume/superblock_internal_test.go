package volume

import (
	"bufio"
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The superblock as read here says what dumpe2fs says, for an image with
// 1 KiB blocks and one with 4 KiB blocks.
func TestReadSuperblockAgreesWithDumpe2fs(t *testing.T) {
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("no mkfs.ext4")
	}
	for _, spec := range []Spec{{Bytes: 8 << 20, Inodes: 300}, {Bytes: 600 << 20, Inodes: 5000, Journal: true}} {
		img := filepath.Join(t.TempDir(), "v.img")
		if err := NewManager().makeImage(context.Background(), img, spec); err != nil {
			t.Fatal(err)
		}
		got, err := readSuperblock(img)
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("dumpe2fs", "-h", img).Output()
		if err != nil {
			t.Skip("dumpe2fs:", err)
		}
		want := map[string]int64{}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), ":")
			want[k], _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
		if got.inodes != want["Inode count"] || got.blocks != want["Block count"] || got.blockSize != want["Block size"] {
			t.Errorf("%+v: read %+v, dumpe2fs says %v", spec, got, want)
		}
	}
}
