//go:build !linux || !(amd64 || arm64)

package seccomp

import (
	"fmt"
	"runtime"
)

var errArch = fmt.Errorf("seccomp: no filter for %s/%s (amd64 and arm64 Linux have one)", runtime.GOOS, runtime.GOARCH)

// Filter is unavailable on this architecture.
func Filter() ([]byte, error) { return nil, errArch }

// DockerProfile is unavailable on this architecture.
func DockerProfile() ([]byte, error) { return nil, errArch }

// Denied is empty on this architecture.
func Denied() []string { return nil }
