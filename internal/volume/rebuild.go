package volume

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// An ext4 filesystem's inode count is fixed per block group when it is
// made; resize2fs adds or drops whole groups, so the count follows the
// size. A volume whose count, at its new size, would be off from
// spec.Inodes is rebuilt: a new image made to spec, what the old one
// holds copied in, the new image put in its place.

// superblock is what an unmounted image's superblock says.
type superblock struct {
	inodes, blocks, blockSize int64
}

// readSuperblock reads image's inode and block counts from its ext4
// superblock (1024 bytes in), without starting dumpe2fs on every mount.
func readSuperblock(image string) (superblock, error) {
	f, err := os.Open(image)
	if err != nil {
		return superblock{}, err
	}
	defer f.Close()
	b := make([]byte, 1024)
	if _, err := f.ReadAt(b, 1024); err != nil {
		return superblock{}, fmt.Errorf("read the superblock of %s: %w", image, err)
	}
	le := binary.LittleEndian
	if le.Uint16(b[0x38:]) != 0xEF53 {
		return superblock{}, fmt.Errorf("%s is not an ext4 image", image)
	}
	sb := superblock{inodes: int64(le.Uint32(b[0:])), blocks: int64(le.Uint32(b[4:])), blockSize: 1024 << le.Uint32(b[24:])}
	if le.Uint32(b[0x60:])&0x80 != 0 { // INCOMPAT_64BIT: the count's high half
		sb.blocks |= int64(le.Uint32(b[0x150:])) << 32
	}
	if sb.inodes <= 0 || sb.blocks <= 0 {
		return superblock{}, fmt.Errorf("%s: no inode or block count in the superblock", image)
	}
	return sb, nil
}

// inodesFor is the inode count makeImage asks mkfs for.
func inodesFor(spec Spec) int64 { return min(spec.Inodes, spec.Bytes/4096) }

// needsRebuild reports whether the image's inode count, scaled to
// spec.Bytes as a resize would, is more than a tenth off spec's.
func needsRebuild(sb superblock, spec Spec) bool {
	if spec.Inodes <= 0 || spec.Bytes <= 0 {
		return false
	}
	scaled := sb.inodes * spec.Bytes / (sb.blocks * sb.blockSize)
	want := inodesFor(spec)
	return scaled < want-want/10 || scaled > want+want/10
}

// rebuild replaces the unmounted image with a new one made to spec
// holding the same files, when they fit, and reports whether it did; when
// they do not (too many files or bytes), the image stays as it was and
// spec.Log says so. The exclusive lock is held.
func rebuild(ctx context.Context, m *Manager, image, dir string, spec Spec, sb superblock) (bool, error) {
	fresh := image + ".rebuild"
	os.Remove(fresh)
	if err := m.makeImage(ctx, fresh, spec); err != nil {
		return false, err
	}
	defer os.Remove(fresh) // nothing left once it took the old one's place
	staging := dir + ".rebuild"
	if err := unmount(staging); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err // a mount a killed process left
	}
	if err := os.MkdirAll(staging, 0o700); err != nil {
		return false, err
	}
	defer os.Remove(staging)
	if err := m.mountImage(ctx, image, dir, nil); err != nil {
		return false, err
	}
	if err := m.mountImage(ctx, fresh, staging, nil); err != nil {
		unix.Unmount(dir, 0)
		m.unmounted(absPath(image))
		return false, err
	}
	os.Remove(filepath.Join(staging, "lost+found"))
	out, cpErr := exec.CommandContext(ctx, "cp", "-a", "--", dir+"/.", staging+"/").CombinedOutput()
	// Plain unmounts, not lazy: each filesystem is shut down when they
	// return, so the renamed image is never live twice.
	errNew := unix.Unmount(staging, 0)
	errOld := unix.Unmount(dir, 0)
	m.unmounted(absPath(fresh))
	m.unmounted(absPath(image))
	if cpErr != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		msg, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n") // one line of cp's, not one per file
		spec.logger().Warn("a volume holds more than its new quota or file count allow; it keeps its old ones until what it holds fits",
			"volume", image, "size", sb.blocks*sb.blockSize, "quota", spec.Bytes, "inodes", sb.inodes, "want_inodes", inodesFor(spec),
			"cp", msg)
		return false, errors.Join(errNew, errOld)
	}
	if err := errors.Join(errNew, errOld); err != nil {
		return false, fmt.Errorf("rebuild: %w", err)
	}
	if err := os.Rename(fresh, image); err != nil {
		return false, err
	}
	return true, nil
}
