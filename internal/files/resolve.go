package files

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/nekro-go/nekro/plugin"
)

// maxLinks bounds the symlinks followed while resolving one path, like the
// kernel's limit of 40.
const maxLinks = 40

// resolveBeneath resolves rel (a local path) inside root the way os.Root
// does, following symlinks and refusing any that is absolute or climbs out,
// and returns the resolved path relative to the root. Components that do
// not exist are kept as they are: nothing there can be a symlink yet. A
// dangling symlink is followed all the same, so it cannot point a later
// create outside the root.
func resolveBeneath(root *os.Root, rel string) (string, error) {
	pending := splitPath(rel)
	var out []string // resolved components: real directories, then the leaf
	exist := 0       // out[:exist] exist; what follows does not (yet)
	links := 0
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(out) == 0 {
				return "", refuse("%s leads out of its directory", rel)
			}
			out = out[:len(out)-1]
			exist = min(exist, len(out))
			continue
		}
		if exist < len(out) {
			// Beneath a missing component nothing exists, so nothing
			// can be a symlink.
			out = append(out, c)
			continue
		}
		cand := filepath.Join(append(out[:len(out):len(out)], c)...)
		fi, err := root.Lstat(cand)
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
			out = append(out, c)
			continue
		case err != nil:
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			out = append(out, c)
			exist = len(out)
			continue
		}
		links++
		if links > maxLinks {
			return "", refuse("%s: too many levels of symbolic links", rel)
		}
		target, err := root.Readlink(cand)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			return "", refuse("%s is a symlink to an absolute path, which leads out of its directory", rel)
		}
		pending = append(splitPath(target), pending...)
	}
	if len(out) == 0 {
		return ".", nil
	}
	return filepath.Join(out...), nil
}

func splitPath(p string) []string { return strings.Split(filepath.ToSlash(p), "/") }

// escapes reports whether err from an os.Root call, made with name, was a
// refusal to leave the root, by resolving name the same way.
func escapes(root *os.Root, name string) bool {
	_, err := resolveBeneath(root, name)
	return errors.Is(err, plugin.ErrPathRefused)
}
