package cli

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeInheritedOnExec marks every descriptor above stderr close-on-exec.
// nekro may inherit open descriptors from whatever started it (a shell's
// redirections, a service manager's sockets, a secret file): Go opens its
// own with O_CLOEXEC, but inherited ones would pass through every exec to
// bwrap and on into the sandbox. Marking them keeps them usable in nekro
// itself and out of every child.
func closeInheritedOnExec() {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return
	}
	// Kernels before 5.11: walk /proc/self/fd.
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}
