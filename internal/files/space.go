package files

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// MinFreeBytes is the free space a data directory must keep to count as
// able to take writes: below it SQLite's WAL, uploads and sandbox files
// are about to fail with a full disk.
const MinFreeBytes = 16 << 20

// ErrNoSpace is CheckSpace's error for a full disk (space or inodes) or a
// read-only file system.
var ErrNoSpace = errors.New("the data directory cannot take writes")

// CheckSpace reports, by statfs alone (no write), whether the file system
// of root can take writes: not read-only, at least MinFreeBytes free, a
// free inode. Its errors wrap ErrNoSpace, or say root cannot be examined;
// they never name root.
func CheckSpace(root string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return fmt.Errorf("the data directory cannot be examined: %w", err)
	}
	if st.Flags&unix.ST_RDONLY != 0 {
		return fmt.Errorf("%w: it is on a read-only file system", ErrNoSpace)
	}
	if free := st.Bavail * uint64(st.Bsize); free < MinFreeBytes {
		return fmt.Errorf("%w: its disk is full: %d KiB free, under the %d MiB nekro needs to keep working", ErrNoSpace, free>>10, MinFreeBytes>>20)
	}
	if st.Files > 0 && st.Ffree == 0 {
		return fmt.Errorf("%w: its disk has no free inode left", ErrNoSpace)
	}
	return nil
}
