// Package backup makes and restores an archive of a data directory while
// nekro serves from it.
//
// An archive is a gzipped tar. Its first entry, ManifestName, says what it
// holds (Manifest); then come a snapshot of the SQLite database (taken
// with VACUUM INTO: one consistent read transaction, however many writers
// are busy), and the data directory's files by their paths below it: the
// API token, names.key, plugins' directories (their config.yaml
// included), and the chats' uploads and shared directories. Directories
// that are volumes (loop-mounted ext4 images, internal/volume) are
// archived by their contents, read through the mount; the sparse images
// themselves never are, nor caches nekro rebuilds (Python plugins'
// installed packages) or a run's working files.
//
// Restore writes such an archive into an empty data directory. The
// volumes' contents come back as plain directories; the runtime moves a
// plain directory's files into a fresh volume the first time the chat or
// plugin is used, as it does for a data directory from before volumes.
package backup

import (
	"archive/tar"
	"cmp"
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the driver internal/db uses

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/volume"
)

// ManifestName is the archive's first entry.
const ManifestName = "nekro-backup.json"

// Format is the version of the archive layout this package writes; Restore
// refuses a newer one.
const Format = 1

// databaseName is the SQLite snapshot's name in the archive and in the
// restored data directory.
const databaseName = "nekro.db"

// Manifest describes an archive.
type Manifest struct {
	Format  int       `json:"format"`
	Version string    `json:"version"` // the nekro binary that wrote it
	Created time.Time `json:"created"`
	// Database is DatabaseSQLite (its snapshot is in the archive) or
	// DatabasePostgres (it is not).
	Database string `json:"database"`
	// Schema is each component's migration version in the snapshot: a
	// binary older than one of them refuses the restored database.
	Schema map[string]int `json:"schema"`
}

// Manifest.Database's values.
const (
	DatabaseSQLite   = "sqlite"
	DatabasePostgres = "postgresql, not in the archive: restore its pg_dump"
)

// Options say what to back up.
type Options struct {
	DataDir string
	// DatabaseURL is --database: "" (or "sqlite:") for the data
	// directory's SQLite file, or PostgreSQL's URL (see Create).
	DatabaseURL string
	Log         *slog.Logger
	// Version names the binary making the backup, for the manifest.
	Version string
}

// skipped are the data directory's top-level names an archive leaves out:
// the images (their contents are archived through their mounts), a run's
// working files, rebuilt caches, and the live database files (the
// snapshot stands for them).
var skipped = []string{"volumes", "runs", "python", databaseName, databaseName + "-wal", databaseName + "-shm"}

// volumeWait bounds the wait for one volume.
const volumeWait = 30 * time.Second

// volumeAreas are the top-level directories whose subdirectories may be
// volumes.
var volumeAreas = []string{"uploads", "sandboxes", "plugins"}

// CreateFile writes an archive of opts.DataDir to path (mode 0600: it
// holds the API token and names.key), replacing path only once the
// archive is complete.
func CreateFile(ctx context.Context, opts Options, path string) (Manifest, error) {
	if abs, err := filepath.Abs(path); err == nil {
		if data, err := filepath.Abs(opts.DataDir); err == nil && strings.HasPrefix(abs, data+string(filepath.Separator)) {
			return Manifest{}, fmt.Errorf("backup: %s is inside the data directory it archives: write it elsewhere", path)
		}
	}
	tmp := path + ".partial"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return Manifest{}, fmt.Errorf("backup: %w", err)
	}
	m, err := Create(ctx, opts, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return Manifest{}, err
	}
	return m, nil
}

// Create writes an archive of opts.DataDir to w. The database snapshot is
// taken first, then the files are read: a file a message of the snapshot
// names is in the archive, and files written after the snapshot may be
// too. Each file is read as it is at that moment; a file being rewritten
// while it is read may be archived half-written (its size is the one it
// had when its read began).
//
// On PostgreSQL the archive holds the data directory's files only
// (Manifest.Database says so): the database's dump belongs to pg_dump of
// the server's own major version (an older pg_dump refuses a newer
// server) or to the operator's PostgreSQL backups, which nekro cannot
// choose for them.
func Create(ctx context.Context, opts Options, w io.Writer) (Manifest, error) {
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	u := opts.DatabaseURL
	postgres := strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://")
	if u != "" && u != "sqlite:" && !postgres {
		return Manifest{}, fmt.Errorf("backup: only the data directory's own SQLite database is backed up, not %s", u)
	}
	layout, err := files.NewLayout(opts.DataDir)
	if err != nil {
		return Manifest{}, fmt.Errorf("backup: %w", err)
	}
	root := layout.Root
	if _, err := os.Stat(root); err != nil {
		return Manifest{}, fmt.Errorf("backup: data directory: %w", err)
	}
	tmp, err := os.MkdirTemp(root, ".backup-")
	if err != nil {
		return Manifest{}, fmt.Errorf("backup: %w", err)
	}
	defer os.RemoveAll(tmp)
	m := Manifest{Format: Format, Version: cmp.Or(opts.Version, "unknown"), Created: time.Now().UTC(), Database: DatabasePostgres}
	snapshot := filepath.Join(tmp, databaseName)
	if !postgres {
		if _, err := os.Stat(layout.Database()); err != nil {
			return Manifest{}, fmt.Errorf("backup: %s has no database: %w", root, err)
		}
		if m.Schema, err = snapshotSQLite(ctx, layout.Database(), snapshot); err != nil {
			return Manifest{}, fmt.Errorf("backup: %w", err)
		}
		m.Database = DatabaseSQLite
	}

	release, err := mountVolumes(ctx, layout)
	defer release()
	if err != nil {
		return Manifest{}, fmt.Errorf("backup: %w", err)
	}

	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	a := archiver{tw: tw, log: log}
	mb, _ := json.MarshalIndent(m, "", "  ")
	if err := a.bytes(ManifestName, append(mb, '\n')); err != nil {
		return Manifest{}, fmt.Errorf("backup: %w", err)
	}
	if !postgres {
		if err := a.file(snapshot, databaseName); err != nil {
			return Manifest{}, fmt.Errorf("backup: database snapshot: %w", err)
		}
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while we walked
			}
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rel, _ := filepath.Rel(root, path)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		top, _, _ := strings.Cut(rel, "/")
		if slices.Contains(skipped, top) || strings.HasPrefix(top, ".backup-") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		// lost+found at a volume's root is mkfs's, not the chat's.
		if d.Name() == "lost+found" && strings.Count(rel, "/") == 2 && slices.Contains(volumeAreas, top) {
			return fs.SkipDir
		}
		return a.entry(path, rel)
	})
	if err != nil {
		return Manifest{}, fmt.Errorf("backup: %w", err)
	}
	if err := tw.Close(); err != nil {
		return Manifest{}, fmt.Errorf("backup: %w", err)
	}
	if err := gz.Close(); err != nil {
		return Manifest{}, fmt.Errorf("backup: %w", err)
	}
	return m, nil
}

// snapshotSQLite writes a consistent copy of the database at src to dst
// and returns its components' schema versions. VACUUM INTO reads the
// database in one transaction, so writers of a serving nekro go on (in
// WAL mode they never wait for a reader) and the copy is the database as
// of one commit, compacted.
func snapshotSQLite(ctx context.Context, src, dst string) (map[string]int, error) {
	d, err := sql.Open("sqlite", "file:"+src+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", src, err)
	}
	defer d.Close()
	if _, err := d.ExecContext(ctx, `VACUUM INTO ?`, dst); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", src, err)
	}
	if err := os.Chmod(dst, 0o600); err != nil {
		return nil, err
	}
	s, err := sql.Open("sqlite", "file:"+dst+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer s.Close()
	rows, err := s.QueryContext(ctx, `SELECT component, MAX(version) FROM nekro_migrations GROUP BY component`)
	if err != nil {
		return nil, fmt.Errorf("read the snapshot's schema versions: %w", err)
	}
	defer rows.Close()
	schema := map[string]int{}
	for rows.Next() {
		var c string
		var v int
		if err := rows.Scan(&c, &v); err != nil {
			return nil, err
		}
		schema[c] = v
	}
	return schema, rows.Err()
}

// mountVolumes makes every volume of the data directory readable at its
// mount point until release: one a serving nekro holds stays as it is
// (this process shares it), one nobody holds is mounted, and unmounted
// again by release unless nekro took it meanwhile.
func mountVolumes(ctx context.Context, layout files.Layout) (release func(), err error) {
	var held []*volume.Volume
	vols := volume.NewManager() // reads the loop devices once, not per volume
	release = func() {
		for _, v := range held {
			v.Release()
		}
	}
	// hold mounts the volume shown at dir, acquired by acquire. Bytes 0
	// and UID -1: it is taken as it is. A volume another process holds
	// but this one does not see mounted (nekro serve in a mount
	// namespace of its own) would be waited for forever: give up with
	// what to do.
	hold := func(dir string, acquire func(context.Context, volume.Spec) (*volume.Volume, error)) error {
		if err := volume.Available(); err != nil {
			return fmt.Errorf("%s is a volume, and this process cannot mount it: %w", dir, err)
		}
		actx, cancel := context.WithTimeout(ctx, volumeWait)
		v, err := acquire(actx, volume.Spec{UID: -1})
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return fmt.Errorf("%s: another nekro process holds this volume, but it is not mounted in this process's mount namespace: "+
				"run nekro backup in nekro serve's (nsenter -t PID -m; docs/install.md)", dir)
		}
		if err != nil {
			return err
		}
		held = append(held, v)
		return nil
	}
	// A chat's volume for both its directories, bound where its record
	// says (beneath the data directory, or it is not the chat's).
	for _, image := range layout.ChatVolumeImages() {
		binds, err := volume.SplitBinds(image)
		if err != nil {
			return release, err
		}
		for _, b := range binds {
			if rel, err := filepath.Rel(layout.Root, b.Mountpoint); err != nil || !slices.Contains(volumeAreas, strings.Split(rel, string(filepath.Separator))[0]) {
				return release, fmt.Errorf("volume %s: its record binds %s, outside the chats' directories", image, b.Mountpoint)
			}
		}
		err = hold(binds[0].Mountpoint, func(ctx context.Context, spec volume.Spec) (*volume.Volume, error) {
			return vols.AcquireSplit(ctx, image, binds, spec)
		})
		if err != nil {
			return release, err
		}
	}
	for _, area := range volumeAreas {
		dirs, _ := filepath.Glob(filepath.Join(layout.Root, area, "*"))
		for _, dir := range dirs {
			image, ok := layout.VolumeImage(dir)
			if !ok {
				continue
			}
			if _, err := os.Stat(image); err != nil {
				continue // a plain directory, or bound from a chat's volume
			}
			err := hold(dir, func(ctx context.Context, spec volume.Spec) (*volume.Volume, error) {
				return vols.Acquire(ctx, image, dir, spec)
			})
			if err != nil {
				return release, err
			}
		}
	}
	return release, nil
}

// archiver writes tar entries.
type archiver struct {
	tw  *tar.Writer
	log *slog.Logger
}

// bytes writes b as the regular file name.
func (a archiver) bytes(name string, b []byte) error {
	if err := a.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o600, Size: int64(len(b)), ModTime: time.Now()}); err != nil {
		return err
	}
	_, err := a.tw.Write(b)
	return err
}

// file writes the regular file at path as name.
func (a archiver) file(path, name string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	return a.write(path, name, fi)
}

// entry writes what path is (a directory, a regular file or a symbolic
// link) as rel; other kinds (sockets, fifos) are left out.
func (a archiver) entry(path, rel string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case fi.IsDir():
		h, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		h.Name = rel + "/"
		return a.tw.WriteHeader(h)
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(path)
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(fi, target)
		if err != nil {
			return err
		}
		h.Name = rel
		return a.tw.WriteHeader(h)
	case fi.Mode().IsRegular():
		return a.write(path, rel, fi)
	}
	a.log.Info("backup: left out a special file", "path", rel, "mode", fi.Mode().String())
	return nil
}

// write archives the regular file at path as name, with the size it has
// when it is opened: what it grows by meanwhile is left out, and what it
// shrinks by is written as zeros (and logged).
func (a archiver) write(path, name string, lfi fs.FileInfo) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil // replaced by something else since it was listed
	}
	h, err := tar.FileInfoHeader(fi, "")
	if err != nil {
		return err
	}
	h.Name = name
	if err := a.tw.WriteHeader(h); err != nil {
		return err
	}
	n, err := io.Copy(a.tw, io.LimitReader(f, fi.Size()))
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if n < fi.Size() {
		a.log.Warn("backup: a file shrank while it was read; the rest is zeros", "path", name)
		if _, err := io.CopyN(a.tw, zeros{}, fi.Size()-n); err != nil {
			return err
		}
	}
	return nil
}

// zeros reads as endless zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
