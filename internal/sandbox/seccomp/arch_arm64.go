//go:build linux

package seccomp

import "golang.org/x/sys/unix"

const (
	auditArch  = unix.AUDIT_ARCH_AARCH64
	dockerArch = "SCMP_ARCH_AARCH64"
	x32Bit     = 0
)
