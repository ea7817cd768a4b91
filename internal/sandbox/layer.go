package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Who writes a chat's package layer. A chat's runs are its users' code
// (each run carries one user's identity in its plugin calls), and every
// run of the chat imports from the layer: code that could write it could
// run as every later user of the chat. So only the host's installer
// (Installer, a sandbox of its own running PipInstallScript, trusted code)
// writes it; every run, fresh or on a zygote, on any backend, has the
// layer mounted read-only over PackagesDir, which no run can undo (it
// holds no capability), rename or remove (it is a mount point in the
// run's namespace). The host makes the directory before a sandbox of the
// chat starts (EnsurePackagesDir), so no code can make it first.

// EnsurePackagesDir returns the host path of the package layer of the
// chat whose shared directory is sharedDir, creating it (mode 0755, given
// to uid:gid unless uid is -1: the installer runs as the chat's uid) when
// it is missing. Something else in its place (a file or a symlink, which
// only code of an older nekro, whose runs could write there, could have
// left) is removed first. Backends call it before every sandbox of the
// chat starts, and mount the result read-only at PackagesDir.
func EnsurePackagesDir(sharedDir string, uid, gid int) (string, error) {
	dir := filepath.Join(sharedDir, PackagesDirName)
	fi, err := os.Lstat(dir)
	switch {
	case err == nil && fi.IsDir():
		return dir, nil
	case err == nil:
		if err := os.Remove(dir); err != nil {
			return "", fmt.Errorf("the chat's package layer %s is not a directory and cannot be removed: %w", dir, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("the chat's package layer: %w", err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("make the chat's package layer: %w", err)
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("the chat's package layer %s is not a directory (%v)", dir, err)
	}
	if uid >= 0 {
		if err := os.Lchown(dir, uid, gid); err != nil {
			return "", fmt.Errorf("give the chat's package layer to uid %d: %w", uid, err)
		}
	}
	return dir, nil
}
