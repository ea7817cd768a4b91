package backup

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// RestoreFile is Restore of the archive at path.
func RestoreFile(ctx context.Context, path, dataDir string) (Manifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return Manifest{}, fmt.Errorf("restore: %w", err)
	}
	defer f.Close()
	return Restore(ctx, f, dataDir)
}

// Restore writes the archive r into dataDir, which must be missing or
// empty: restoring over a data directory in use would mix two databases'
// chats with one's files. Files keep their modes, times and (when this
// process is root) owners: a chat's files stay its sandbox uid's, which
// the restored database assigns again. Entries must stay below dataDir;
// one that does not fails the restore. A restore that fails leaves what
// it wrote: remove the directory and try again.
func Restore(ctx context.Context, r io.Reader, dataDir string) (Manifest, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return Manifest{}, fmt.Errorf("restore: %w", err)
	}
	if ents, err := os.ReadDir(abs); err == nil && len(ents) > 0 {
		return Manifest{}, fmt.Errorf("restore: %s is not empty: restore into a new data directory (and point --data at it)", abs)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Manifest{}, fmt.Errorf("restore: %w", err)
	}
	gz, err := gzip.NewReader(r)
	if err != nil {
		return Manifest{}, fmt.Errorf("restore: not a nekro backup (gzip): %w", err)
	}
	tr := tar.NewReader(gz)
	h, err := tr.Next()
	if err != nil || h.Name != ManifestName {
		return Manifest{}, fmt.Errorf("restore: not a nekro backup: it does not start with %s", ManifestName)
	}
	var m Manifest
	if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("restore: %s: %w", ManifestName, err)
	}
	if m.Format > Format || m.Format < 1 {
		return Manifest{}, fmt.Errorf("restore: the archive's format %d is not this binary's %d (restore it with the nekro that made it, %s)", m.Format, Format, m.Version)
	}
	// The data directory is 0711 as nekro makes it: sandbox uids traverse
	// it to their own directories, and list nothing.
	if err := os.MkdirAll(abs, 0o711); err != nil {
		return Manifest{}, fmt.Errorf("restore: %w", err)
	}
	if err := os.Chmod(abs, 0o711); err != nil {
		return Manifest{}, fmt.Errorf("restore: %w", err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return Manifest{}, fmt.Errorf("restore: %w", err)
	}
	defer root.Close()
	asRoot := os.Geteuid() == 0
	var dirs []*tar.Header // modes and times set last: a read-only directory is filled first
	for {
		if ctx.Err() != nil {
			return Manifest{}, fmt.Errorf("restore: %w", ctx.Err())
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Manifest{}, fmt.Errorf("restore: %w", err)
		}
		name := strings.TrimSuffix(h.Name, "/")
		if !filepath.IsLocal(name) {
			return Manifest{}, fmt.Errorf("restore: entry %q leaves the data directory", h.Name)
		}
		if err := restoreEntry(root, name, h, tr); err != nil {
			return Manifest{}, fmt.Errorf("restore: %s: %w", name, err)
		}
		if asRoot {
			if err := root.Lchown(name, h.Uid, h.Gid); err != nil {
				return Manifest{}, fmt.Errorf("restore: %s: %w", name, err)
			}
		}
		if h.Typeflag == tar.TypeDir {
			dirs = append(dirs, h)
		} else if h.Typeflag == tar.TypeReg {
			if err := root.Chmod(name, fs.FileMode(h.Mode).Perm()); err != nil {
				return Manifest{}, fmt.Errorf("restore: %s: %w", name, err)
			}
			root.Chtimes(name, h.ModTime, h.ModTime)
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		name := strings.TrimSuffix(dirs[i].Name, "/")
		if err := root.Chmod(name, fs.FileMode(dirs[i].Mode).Perm()); err != nil {
			return Manifest{}, fmt.Errorf("restore: %s: %w", name, err)
		}
		root.Chtimes(name, dirs[i].ModTime, dirs[i].ModTime)
	}
	return m, nil
}

// restoreEntry creates the entry h names.
func restoreEntry(root *os.Root, name string, h *tar.Header, r io.Reader) error {
	if dir := filepath.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if err := root.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		return nil
	case tar.TypeSymlink:
		return root.Symlink(h.Linkname, name)
	case tar.TypeReg:
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, r); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	return fmt.Errorf("unexpected entry type %q", h.Typeflag)
}
