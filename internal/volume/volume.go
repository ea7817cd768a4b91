// Package volume bounds a directory's disk use at the filesystem level: the
// directory becomes the mount point of an ext4 image of its own, sized to
// the quota, loop-mounted. A writer past the quota gets ENOSPC (too many
// files too) while it writes, and the host's disk holds at most the
// image. Sandbox code writing /app/shared and plugins writing their data
// directories are bounded this way; a bind mount of such a directory also
// shows the sandbox no host path, only the image's root.
//
// Images are sparse: a fresh one takes well under a megabyte on the host
// (a few with a journal) and grows with what is written, up to its size.
//
// Several nekro processes may share a data directory (`nekro exec` next to
// `nekro serve`). An image is never mounted twice (two loop devices on one
// ext4 image corrupt it): whoever acquires a volume takes a lock file next
// to the image, exclusively while it creates or mounts it and shared
// while it holds it; the last holder to release it unmounts it. A mount
// left by a killed process is found and reused, and so is a loop device
// still bound to the image (a filesystem something still holds after its
// unmount): a Manager remembers which device each image is bound to, and
// the lock file records it for other processes, so a mount does not read
// every loop device of the host.
//
// Volumes need root, loop devices and mkfs.ext4; Available says what is
// missing. mkfs.ext4 and mount(8) are run as commands: mount's -o loop
// finds a free loop device, reuses one already bound to the same image,
// and frees it when the filesystem is unmounted.
package volume

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Spec is the size of a volume and who owns its root directory.
type Spec struct {
	Bytes    int64       // filesystem size: the quota
	Inodes   int64       // files and directories it can hold
	UID, GID int         // owner of the root directory; -1 keeps root
	Mode     os.FileMode // of the root directory, e.g. 0o700
	// Journal gives the filesystem a journal, for data that must survive
	// a crash intact (plugin data); scratch space goes without.
	Journal bool
	// Log hears of a smaller Bytes that could not be applied (the content
	// does not fit, or the volume is mounted); nil is slog.Default().
	Log *slog.Logger
}

// Usage is what a volume holds.
type Usage struct {
	Bytes, BytesLimit   int64
	Inodes, InodesLimit int64
}

// Available reports whether volumes can be made on this machine: nil, or
// what is missing and how to get it.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("volumes need root (nekro runs as another user)")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return errors.New("no loop devices (/dev/loop-control is missing: load the loop module, or give the container loop devices)")
	}
	for _, tool := range []string{"mkfs.ext4", "debugfs", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not installed (apt-get install -y e2fsprogs mount)", tool)
		}
	}
	fs, err := os.ReadFile("/proc/filesystems")
	if err != nil || !strings.Contains(string(fs), "\text4\n") {
		return errors.New("the kernel does not support ext4")
	}
	return nil
}

// Volume is an acquired volume: mounted while any holder has it.
type Volume struct {
	image, path string // path: the mount point (a split volume's first bind's)
	binds       []Bind // a split volume's directories; nil: the image's root is at path
	lock        *os.File
	m           *Manager
}

// Bind is a directory at the root of a split volume and where it is bound
// (Manager.AcquireSplit).
type Bind struct {
	Dir        string `json:"dir"` // one path component, e.g. "uploads"
	Mountpoint string `json:"mountpoint"`
}

// Path returns the mount point (a split volume's first bind's).
func (v *Volume) Path() string { return v.path }

// mountpoints are where the volume shows.
func (v *Volume) mountpoints() []string {
	if v.binds == nil {
		return []string{v.path}
	}
	mps := make([]string, len(v.binds))
	for i, b := range v.binds {
		mps[i] = b.Mountpoint
	}
	return mps
}

// isMounted reports whether the volume shows at every mount point.
func (v *Volume) isMounted() (bool, error) {
	for _, mp := range v.mountpoints() {
		if ok, err := mounted(mp); err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// Acquire is Manager.Acquire with a manager of its own: it reads every
// loop device once to find an image still bound to one, which a process
// mounting many volumes pays for each (see Manager).
func Acquire(ctx context.Context, image, mountpoint string, spec Spec) (*Volume, error) {
	return NewManager().Acquire(ctx, image, mountpoint, spec)
}

// Acquire makes sure the image exists (created with spec when missing)
// and is mounted at mountpoint (created if missing), and holds it until
// Release. Files already in a plain mountpoint directory are moved into
// the new volume. A spec.Bytes of 0 takes an existing volume as it is.
// When the image is smaller than spec.Bytes it grows, online when it is
// mounted. When it is larger, it shrinks as it is mounted (ext4 shrinks
// only unmounted) if what it holds fits in spec.Bytes; otherwise it keeps
// its size and spec.Log says why. A resize changes the inode count in
// proportion (ext4 fixes the count per block group); when that count
// would be more than a tenth off spec.Inodes, the volume is instead
// rebuilt to spec as it is mounted (its files copied into a new image),
// again only if they fit.
func (m *Manager) Acquire(ctx context.Context, image, mountpoint string, spec Spec) (*Volume, error) {
	return m.acquire(ctx, &Volume{image: image, path: mountpoint, m: m}, spec)
}

// AcquireSplit is Acquire for a split volume: one image (one filesystem,
// one loop device, one quota) whose root holds a directory per bind, each
// bound at its own mount point. The image's root is mounted nowhere (only
// for a moment at image+".mnt" where the kernel lacks fsmount or files
// must move in): the binds hold the filesystem, and the last one
// unmounted frees it. spec's UID, GID and Mode apply to each bound
// directory. Files already in a plain mount point directory are moved
// into the volume's directory for it.
//
// The binds are recorded in the image's lock file (SplitBinds), so a
// process that knows only the image (a backup) can mount it where it
// belongs.
func (m *Manager) AcquireSplit(ctx context.Context, image string, binds []Bind, spec Spec) (*Volume, error) {
	if len(binds) == 0 {
		return nil, fmt.Errorf("volume %s: no binds", image)
	}
	for _, b := range binds {
		if b.Dir == "" || b.Dir == "." || b.Dir == ".." || strings.ContainsRune(b.Dir, '/') {
			return nil, fmt.Errorf("volume %s: %q is not a directory name", image, b.Dir)
		}
	}
	return m.acquire(ctx, &Volume{image: image, path: binds[0].Mountpoint, binds: slices.Clone(binds), m: m}, spec)
}

func (m *Manager) acquire(ctx context.Context, v *Volume, spec Spec) (*Volume, error) {
	image := v.image
	if err := os.MkdirAll(filepath.Dir(image), 0o700); err != nil {
		return nil, fmt.Errorf("volume %s: %w", image, err)
	}
	lock, err := os.OpenFile(image+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("volume %s: lock: %w", image, err)
	}
	v.lock = lock
	fd := int(lock.Fd())
	// While anyone holds the lock shared, the volume is mounted: only a
	// holder of the exclusive lock mounts or unmounts it. So: hold it
	// shared and look; if it is not mounted, take it exclusively (nobody
	// else holding it), set it up, and go back to shared.
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		if err := flock(ctx, lock, unix.LOCK_SH); err != nil {
			lock.Close()
			return nil, fmt.Errorf("volume %s: lock: %w", image, err)
		}
		if ok, err := v.isMounted(); err == nil && ok {
			if fi, err := os.Stat(image); err == nil && spec.Bytes > 0 && fi.Size() > spec.Bytes {
				spec.logger().Warn("a volume keeps its larger size while it is mounted; the smaller quota applies when no nekro process holds it",
					"volume", image, "size", fi.Size(), "quota", spec.Bytes)
			}
			if err := v.adjust(ctx, spec); err != nil {
				lock.Close()
				return nil, fmt.Errorf("volume %s: %w", image, err)
			}
			return v, nil
		}
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) == nil {
			err := v.setUp(ctx, spec)
			if err == nil {
				err = flock(ctx, lock, unix.LOCK_SH) // never lets go in between
			}
			if err != nil {
				lock.Close()
				return nil, fmt.Errorf("volume %s: %w", image, err)
			}
			return v, nil
		}
		// Someone else is setting it up (or leaving): look again shortly.
		unix.Flock(fd, unix.LOCK_UN)
		select {
		case <-ctx.Done():
			lock.Close()
			return nil, fmt.Errorf("volume %s: %w", image, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// setUp creates and mounts the volume; the exclusive lock is held.
func (v *Volume) setUp(ctx context.Context, spec Spec) error {
	for _, mp := range v.mountpoints() {
		if err := os.MkdirAll(mp, 0o700); err != nil {
			return err
		}
	}
	isMounted, err := v.isMounted()
	if err != nil {
		return err
	}
	if !isMounted {
		// at is where the image's root is mounted to rebuild it: the
		// mount point, or for a split volume a place of its own.
		at := v.path
		if v.binds != nil {
			// Binds a killed process left part made go: the exclusive
			// lock says no process holds the volume.
			if err := v.unmountAll(); err != nil {
				return err
			}
			// And the image's root, if one was left mounted there.
			at = v.image + ".mnt"
			if err := unmount(at); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			defer os.Remove(at)
		}
		fresh := false // a copy of the template: empty, no lost+found
		if _, err := os.Stat(v.image); errors.Is(err, os.ErrNotExist) {
			if err := v.m.makeImage(ctx, v.image, spec); err != nil {
				return err
			}
			fresh = true
		} else if err := v.awaitDetached(ctx, spec); err != nil {
			spec.logger().Warn("a volume is still attached to a loop device of an ending process (a sandbox that kept it bound): its quota and inode changes wait for its next mount",
				"volume", v.image, "err", err)
			spec.Bytes, spec.Inodes = 0, 0 // no offline resize of a filesystem mounted elsewhere
		} else if sb, err := readSuperblock(v.image); err != nil {
			spec.logger().Warn("a volume's inode count could not be read; it stays as it is", "volume", v.image, "err", err)
		} else if needsRebuild(sb, spec) {
			if err := os.MkdirAll(at, 0o700); err != nil {
				return err
			}
			if rebuilt, err := rebuild(ctx, v.m, v.image, at, spec, sb); err != nil {
				return err
			} else if !rebuilt {
				spec.Bytes = max(spec.Bytes, sb.blocks*sb.blockSize) // said why already: grow only
			}
		}
		if err := grow(ctx, v.image, spec.Bytes, false); err != nil { // no-op when spec.Bytes is 0
			return err
		}
		if err := shrink(ctx, v.image, spec); err != nil {
			return err
		}
		if v.binds != nil {
			if err := v.writeBinds(); err != nil {
				return err
			}
			if err := v.mountSplit(ctx, at, fresh); err != nil {
				return err
			}
		} else if err := v.mountMoving(ctx, fresh); err != nil {
			return err
		}
	}
	return v.adjust(ctx, spec)
}

// mountSplit binds each of the image's directories at its mount point
// (made when missing; a plain mount point's files moved into it first).
// The image's root is mounted nowhere: a detached mount (fsmount, Linux
// 5.2+) the binds are cloned from, or where files must move in or the
// kernel is older, a mount at at detached once the binds are made.
func (v *Volume) mountSplit(ctx context.Context, at string, fresh bool) (err error) {
	plain := true
	for _, b := range v.binds {
		if ents, err := os.ReadDir(b.Mountpoint); err != nil || len(ents) > 0 {
			plain = false
		}
	}
	if plain {
		err := v.mountSplitDetached(fresh)
		if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
			return err
		}
	}
	if err := os.MkdirAll(at, 0o700); err != nil {
		return err
	}
	if err := v.m.mountImage(ctx, v.image, at, v.lock); err != nil {
		return err
	}
	defer func() {
		if derr := unix.Unmount(at, unix.MNT_DETACH); derr != nil && err == nil {
			err = fmt.Errorf("detach %s: %w", at, derr)
		}
		if err != nil {
			v.unmountAll() // the filesystem goes with its last bind
		}
	}()
	if !fresh {
		os.Remove(filepath.Join(at, "lost+found")) // an empty fsck directory nobody need see
	}
	for _, b := range v.binds {
		src := filepath.Join(at, b.Dir)
		if err := os.Mkdir(src, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		if err := moveInto(ctx, b.Mountpoint, src); err != nil {
			return err
		}
		if err := unix.Mount(src, b.Mountpoint, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s of %s at %s: %w", b.Dir, v.image, b.Mountpoint, err)
		}
	}
	return nil
}

// mountSplitDetached mounts the image's filesystem detached (fsmount)
// and moves a clone of each bound directory to its mount point (open_tree,
// move_mount): no directory on the host for the image's root, no mount
// of it to undo. ENOSYS: the kernel has not the calls.
func (v *Volume) mountSplitDetached(fresh bool) (err error) {
	root := -1
	err = v.m.withLoop(absPath(v.image), v.lock, func(dev string) error {
		fd, err := unix.Fsopen("ext4", unix.FSOPEN_CLOEXEC)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.FsconfigSetString(fd, "source", dev); err != nil {
			return fmt.Errorf("mount %s: %w", dev, err)
		}
		if err := unix.FsconfigCreate(fd); err != nil {
			return fmt.Errorf("mount %s: %w", dev, err)
		}
		root, err = unix.Fsmount(fd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOATIME)
		if err != nil {
			return fmt.Errorf("mount %s: %w", dev, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	defer unix.Close(root) // the binds hold the filesystem
	defer func() {
		if err != nil {
			v.unmountAll()
		}
	}()
	if !fresh {
		unix.Unlinkat(root, "lost+found", unix.AT_REMOVEDIR) // an empty fsck directory nobody need see
	}
	for _, b := range v.binds {
		if err := unix.Mkdirat(root, b.Dir, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("volume %s: make %s: %w", v.image, b.Dir, err)
		}
		tree, err := unix.OpenTree(root, b.Dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return fmt.Errorf("bind %s of %s: %w", b.Dir, v.image, err)
		}
		err = unix.MoveMount(tree, "", unix.AT_FDCWD, b.Mountpoint, unix.MOVE_MOUNT_F_EMPTY_PATH)
		unix.Close(tree)
		if err != nil {
			return fmt.Errorf("bind %s of %s at %s: %w", b.Dir, v.image, b.Mountpoint, err)
		}
	}
	return nil
}

// moveInto moves what the plain directory dir holds (files from before
// volumes were used, or restored from a backup) into the directory to:
// copied, then removed from dir. Interrupted, it copies again next time.
func moveInto(ctx context.Context, dir, to string) error {
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) == 0 {
		return err
	}
	if out, err := exec.CommandContext(ctx, "cp", "-a", "--", dir+"/.", to+"/").CombinedOutput(); err != nil {
		return fmt.Errorf("move files into the volume (they are kept in %s): %v: %s", dir, err, strings.TrimSpace(string(out)))
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("move files into the volume: %w", err)
		}
	}
	return nil
}

// splitRecord is the second line of a split volume's lock file: its
// binds, mount points relative to the image's directory. It costs no file
// of its own (a new file on the host's disk is not free).
type splitRecord struct {
	Binds []Bind `json:"binds"`
}

// writeBinds records the binds in the lock file (held exclusively), when
// it says otherwise or nothing.
func (v *Volume) writeBinds() error {
	base := filepath.Dir(absPath(v.image))
	rec := splitRecord{}
	for _, b := range v.binds {
		rel, err := filepath.Rel(base, absPath(b.Mountpoint))
		if err != nil {
			return fmt.Errorf("volume %s: %w", v.image, err)
		}
		rec.Binds = append(rec.Binds, Bind{Dir: b.Dir, Mountpoint: rel})
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	dev, old := recordLines(v.lock)
	if old == string(data) {
		return nil
	}
	if err := writeRecordLines(v.lock, dev, string(data)); err != nil {
		return fmt.Errorf("volume %s: record its binds: %w", v.image, err)
	}
	return nil
}

// SplitBinds returns the binds of the split volume image, as its last
// set-up recorded them (mount points absolute); an error when the image
// is not a split volume's.
func SplitBinds(image string) ([]Bind, error) {
	f, err := os.Open(image + ".lock")
	if err != nil {
		return nil, fmt.Errorf("volume %s: %w", image, err)
	}
	defer f.Close()
	_, line := recordLines(f)
	var rec splitRecord
	if err := json.Unmarshal([]byte(line), &rec); err != nil || len(rec.Binds) == 0 {
		return nil, fmt.Errorf("volume %s: no binds recorded (%v)", image, err)
	}
	base := filepath.Dir(absPath(image))
	for i, b := range rec.Binds {
		rec.Binds[i].Mountpoint = filepath.Join(base, b.Mountpoint)
	}
	return rec.Binds, nil
}

// unmountAll unmounts the volume from every mount point.
func (v *Volume) unmountAll() error {
	var errs []error
	for _, mp := range v.mountpoints() {
		if err := unmount(mp); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// adjust grows a mounted volume to spec and sets its root's owner and
// mode (a chat's uid may have been reassigned).
func (v *Volume) adjust(ctx context.Context, spec Spec) error {
	if err := grow(ctx, v.image, spec.Bytes, true); err != nil {
		// Growing a mounted ext4 takes CAP_SYS_RESOURCE, which a container
		// may lack; it grows offline when it is next mounted.
		spec.logger().Warn("a mounted volume could not grow to its new quota; it grows when it is next mounted",
			"volume", v.image, "quota", spec.Bytes, "err", err)
	}

	for _, mp := range v.mountpoints() {
		if spec.UID >= 0 {
			if err := os.Chown(mp, spec.UID, spec.GID); err != nil {
				return err
			}
		}
		if spec.Mode != 0 {
			if err := os.Chmod(mp, spec.Mode); err != nil {
				return err
			}
		}
	}
	return nil
}

// makeImage writes a sparse ext4 image: a copy of an empty one made once
// per spec (template), which saves a new chat's volumes an mkfs.ext4
// each (an exec and writing the filesystem's metadata).
func (m *Manager) makeImage(ctx context.Context, image string, spec Spec) error {
	if spec.Bytes < 1<<20 {
		return fmt.Errorf("a volume of %d bytes is too small (at least 1 MiB)", spec.Bytes)
	}
	tmpl, err := m.template(ctx, filepath.Dir(image), spec)
	if err != nil {
		return err
	}
	tmp := image + ".new"
	if err := copySparse(tmpl, tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("copy the empty volume %s: %w", tmpl, err)
	}
	return os.Rename(tmp, image)
}

// blockSize is the images' filesystem block size.
const blockSize = 4096

// onlineGrowth is how many times its size a mounted image can grow to.
const onlineGrowth = 64

// mkfsArgs are mkfs.ext4's options for an image of spec.
func mkfsArgs(spec Spec) []string {
	// Room in the group descriptor table for growing online to
	// onlineGrowth times the size (resize=, in 4 KiB blocks): mkfs's
	// default, 1024 times, reserves 127 blocks of a 1 GiB image that
	// every new image copies and its first mount writes to the host's
	// disk (656 KiB an image against 176). A quota raised further grows
	// the image when it is next mounted (resize2fs offline).
	//
	// discard: mkfs punches the new file's blocks (all holes already),
	// knows them zero and marks every block group's inode table zeroed
	// (ITABLE_ZEROED). With nodiscard it left them unmarked, and the
	// first mount of every copy woke the kernel's ext4lazyinit thread,
	// which punched each group's table through the loop device and
	// rewrote its descriptors: disk work and CPU for each new chat's
	// volumes, after the run that mounted them.
	blocks := spec.Bytes / blockSize
	resize := min(onlineGrowth*blocks, 1<<32-1)
	args := []string{"-q", "-F", "-m", "0", "-b", strconv.Itoa(blockSize),
		"-E", "discard,resize=" + strconv.FormatInt(resize, 10)}
	if spec.Inodes > 0 {
		// At most one inode per 4 KiB: the inode tables (256 bytes each)
		// then take at most a sixteenth of the image, and mkfs accepts it.
		args = append(args, "-N", strconv.FormatInt(inodesFor(spec), 10))
	}
	switch {
	case spec.Journal && spec.Bytes >= 64<<20:
		args = append(args, "-J", "size=4") // mkfs would take 16+ MiB of a large image
	case spec.Journal: // mkfs's own size fits small images
	default:
		args = append(args, "-O", "^has_journal")
	}
	return args
}

// template returns the empty image of spec in dir, made by mkfs.ext4 the
// first time (by whichever process gets there, one goroutine at a time
// in a process; a finished one is renamed into place, so none is ever
// seen half written). Its name holds a hash
// of the size and mkfs's options, so a changed spec gets another. Copies
// share the filesystem's UUID, which ext4 does not need to be unique
// (two copies mount side by side; only tools that find filesystems by
// UUID, which nekro does not use, would see them alike).
func (m *Manager) template(ctx context.Context, dir string, spec Spec) (string, error) {
	m.tmu.Lock()
	defer m.tmu.Unlock()
	args := mkfsArgs(spec)
	h := sha256.Sum256([]byte(strconv.FormatInt(spec.Bytes, 10) + "\x00" + strings.Join(args, "\x00")))
	path := filepath.Join(dir, ".empty-"+hex.EncodeToString(h[:8])+".img")
	if fi, err := os.Stat(path); err == nil && fi.Size() == spec.Bytes {
		if _, err := readSuperblock(path); err == nil {
			return path, nil
		}
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".*.new")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	err = f.Truncate(spec.Bytes)
	f.Close()
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	if out, err := exec.CommandContext(ctx, "mkfs.ext4", append(args, tmp)...).CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("mkfs.ext4: %v: %s", err, strings.TrimSpace(string(out)))
	}
	// lost+found is e2fsck's, which makes it again when it needs it; gone
	// from the template, a new volume's first mount neither removes it
	// (writing the directory, its inode and the bitmaps) nor looks for it
	// (reading the root directory through the loop device).
	if err := removeLostFound(ctx, tmp); err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return path, nil
}

// removeLostFound removes the empty lost+found of the unmounted image.
// debugfs exits 0 whatever its commands did; a line other than its
// banner is an error.
func removeLostFound(ctx context.Context, image string) error {
	out, err := exec.CommandContext(ctx, "debugfs", "-w", "-R", "rmdir lost+found", image).CombinedOutput()
	if err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if line != "" && !strings.HasPrefix(line, "debugfs ") {
				err = errors.New(line)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("debugfs: remove lost+found: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// copySparse copies the file src to a new file dst, holes included: a
// clone of its blocks where the filesystem shares them (FICLONE: btrfs,
// XFS), else its data ranges only (SEEK_DATA, SEEK_HOLE) through
// copy_file_range, the rest left holes.
func copySparse(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	if unix.IoctlFileClone(int(out.Fd()), int(in.Fd())) == nil {
		return out.Close()
	}
	rfd, wfd, size := int(in.Fd()), int(out.Fd()), fi.Size()
	for off := int64(0); off < size; {
		data, err := unix.Seek(rfd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // holes to the end
		}
		if err != nil {
			return fmt.Errorf("seek data: %w", err)
		}
		hole, err := unix.Seek(rfd, data, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("seek hole: %w", err)
		}
		for roff, woff := data, data; roff < hole; {
			n, err := unix.CopyFileRange(rfd, &roff, wfd, &woff, int(hole-roff), 0)
			if err != nil {
				return fmt.Errorf("copy_file_range: %w", err)
			}
			if n == 0 {
				return fmt.Errorf("copy_file_range: %s ended at %d", src, roff)
			}
		}
		off = hole
	}
	if err := out.Truncate(size); err != nil {
		return err
	}
	return out.Close()
}

// grow enlarges the image to size bytes (online when it is mounted). A
// failed grow leaves the image its old size, so the next attempt grows it
// again.
func grow(ctx context.Context, image string, size int64, online bool) error {
	fi, err := os.Stat(image)
	if err != nil || fi.Size() >= size {
		return err
	}
	if err := os.Truncate(image, size); err != nil {
		return err
	}
	target, dev := image, ""
	if online {
		// The loop device must see the new size before the filesystem can.
		if d, err := loopDevice(image); err == nil {
			dev = d
			exec.CommandContext(ctx, "losetup", "-c", dev).Run()
			target = dev
		}
	}
	undo := func() {
		// Back to the old size only when the filesystem did not grow
		// (a resize2fs that failed part way may have).
		if sb, err := readSuperblock(image); err != nil || sb.blocks*sb.blockSize > fi.Size() {
			return
		}
		os.Truncate(image, fi.Size())
		if dev != "" {
			exec.Command("losetup", "-c", dev).Run()
		}
	}
	if !online {
		// Offline, resize2fs wants a filesystem checked since it was last
		// mounted: a quick forced check of a small image first.
		out, err := exec.CommandContext(ctx, "e2fsck", "-f", "-p", image).CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) { // 1: errors fixed
			undo()
			return fmt.Errorf("e2fsck: %v: %s", err, strings.TrimSpace(string(out)))
		}
	}
	if out, err := exec.CommandContext(ctx, "resize2fs", target).CombinedOutput(); err != nil {
		undo()
		return fmt.Errorf("resize2fs: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (s Spec) logger() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

// shrink makes the unmounted image spec.Bytes large when it is larger and
// what it holds fits; when it does not fit, the image keeps its size and
// spec.Log says so. resize2fs moves the blocks in use below the new end
// first, and refuses a size below what the filesystem needs.
func shrink(ctx context.Context, image string, spec Spec) error {
	fi, err := os.Stat(image)
	if err != nil || spec.Bytes <= 0 || fi.Size() <= spec.Bytes {
		return err
	}
	out, err := exec.CommandContext(ctx, "e2fsck", "-f", "-p", image).CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) { // 1: errors fixed
		return fmt.Errorf("e2fsck: %v: %s", err, strings.TrimSpace(string(out)))
	}
	kib := strconv.FormatInt(spec.Bytes>>10, 10) + "K"
	if out, err := exec.CommandContext(ctx, "resize2fs", image, kib).CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		spec.logger().Warn("a volume holds more than its new quota and keeps its size until what it holds fits",
			"volume", image, "size", fi.Size(), "quota", spec.Bytes, "resize2fs", strings.TrimSpace(string(out)))
		return nil
	}
	// Never cut the image below its filesystem (a resize2fs that did
	// less than asked would leave a filesystem longer than its device).
	if sb, err := readSuperblock(image); err != nil || sb.blocks*sb.blockSize > spec.Bytes {
		spec.logger().Warn("a volume's filesystem did not shrink to its new quota; the image keeps its size",
			"volume", image, "quota", spec.Bytes, "err", err)
		return nil
	}
	return os.Truncate(image, spec.Bytes)
}

// mountImage mounts the ext4 image at dir through a loop device that goes
// away when the filesystem is unmounted. It binds the device itself
// (LOOP_CONFIGURE, Linux 5.8+: about 5 ms) and runs mount(8) only where
// that is not possible (an older kernel, no /dev/loopN nodes): starting
// mount(8) took ~33 ms here, most of a new chat's first run. rec, when
// not nil, is the image's lock file, held exclusively: it records the
// device for other processes (Manager).
func (m *Manager) mountImage(ctx context.Context, image, dir string, rec *os.File) error {
	abs, err := filepath.Abs(image)
	if err != nil {
		return err
	}
	err = m.mountLoop(abs, dir, rec)
	if err == nil {
		return nil
	}
	out, merr := exec.CommandContext(ctx, "mount", "-o", "loop,nosuid,nodev,noatime", image, dir).CombinedOutput()
	if merr != nil {
		return fmt.Errorf("mount: %v: %s (binding a loop device directly: %v)", merr, strings.TrimSpace(string(out)), err)
	}
	if dev := mountedDevice(dir); dev != "" {
		m.remember(abs, dev)
		writeRecord(rec, dev)
	}
	return nil
}

const mountFlags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOATIME

// mountLoop mounts image (absolute) at dir. An image still bound to a
// loop device (its filesystem still alive: a process that held the volume
// has unmounted it lazily while something of it, such as a plugin's
// process or a sandbox's bind mount, still had it) is mounted through that
// device, which gives the same live filesystem, as mount(8) does: a second
// device on the image would be a second filesystem over the same blocks,
// showing stale contents and corrupting it. Otherwise it binds a free loop
// device (autoclear) to the image; another process can take the free
// device first, and then it tries the next one.
func (m *Manager) mountLoop(image, dir string, rec *os.File) error {
	return m.withLoop(image, rec, func(dev string) error {
		if err := unix.Mount(dev, dir, "ext4", mountFlags, ""); err != nil {
			return fmt.Errorf("mount %s at %s: %w", dev, dir, err)
		}
		return nil
	})
}

// withLoop calls mount with the loop device image (absolute) is bound to,
// binding a free one when it has none (mountLoop says how), and records
// the device once mount succeeded. mount must mount the device's
// filesystem (the device goes away when its last user lets it go). A
// device gone meanwhile (ENXIO, ENOENT from mount) is looked for again.
func (m *Manager) withLoop(image string, rec *os.File, mount func(dev string) error) error {
	for range 8 {
		dev, err := m.bound(image, rec)
		if err != nil {
			return err
		}
		var hold *os.File
		if dev == "" {
			// One bind at a time in this process: LOOP_CTL_GET_FREE
			// gives every concurrent caller the same device, and all but
			// one of them then fail with EBUSY (new chats mount their
			// volumes at once: 8 tries were not enough for 11-29 of the
			// 80 volumes of 40 new chats, which fell back to mount(8)).
			m.bindMu.Lock()
			dev, hold, err = bindLoop(image)
			m.bindMu.Unlock()
			if errors.Is(err, unix.EBUSY) {
				continue // the free device was taken meanwhile
			}
			if err != nil {
				return err
			}
		}
		err = mount(dev)
		if hold != nil {
			hold.Close() // the mount holds the device now, or it goes away
		}
		if err == nil {
			m.remember(image, dev)
			if err := writeRecord(rec, dev); err != nil {
				return fmt.Errorf("record the loop device of %s: %w", image, err)
			}
			return nil
		}
		m.forget(image, dev)
		if !errors.Is(err, unix.ENXIO) && !errors.Is(err, unix.ENOENT) {
			return err
		}
		// The bound device went away meanwhile: look again.
	}
	return errors.New("no loop device for the image stayed usable")
}

// bindLoop binds a free loop device to image with autoclear: it goes away
// when its last user, the filesystem about to be mounted, lets it go. It
// returns the device and an open descriptor of it, which keeps it bound
// until the caller has mounted it and closes that.
func bindLoop(image string) (string, *os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, err
	}
	defer ctl.Close()
	img, err := os.OpenFile(image, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, err
	}
	defer img.Close()
	n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
	if err != nil {
		return "", nil, fmt.Errorf("find a free loop device: %w", err)
	}
	dev := "/dev/loop" + strconv.Itoa(n)
	loop, err := os.OpenFile(dev, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, err
	}
	cfg := unix.LoopConfig{Fd: uint32(img.Fd())}
	cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
	copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], image)
	if err := unix.IoctlLoopConfigure(int(loop.Fd()), &cfg); err != nil {
		loop.Close()
		return "", nil, fmt.Errorf("bind %s to %s: %w", dev, image, err)
	}
	return dev, loop, nil
}

// mountMoving mounts the image at the mount point. Whatever a plain
// directory held (files from before volumes were used) is moved into the
// volume. An image not fresh from the template may hold an empty
// lost+found (made by mkfs before the template lost it), which goes.
func (v *Volume) mountMoving(ctx context.Context, fresh bool) error {
	dir := v.path
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var aside string
	if len(ents) > 0 {
		aside = dir + ".moving"
		os.RemoveAll(aside)
		if err := os.Rename(dir, aside); err != nil {
			return err
		}
		if err := os.Mkdir(dir, 0o700); err != nil {
			return err
		}
	}
	if err := v.m.mountImage(ctx, v.image, dir, v.lock); err != nil {
		if aside != "" {
			os.Remove(dir)
			os.Rename(aside, dir)
		}
		return err
	}
	if !fresh {
		os.Remove(filepath.Join(dir, "lost+found")) // an empty fsck directory the sandbox need not see
	}
	if aside != "" {
		if out, err := exec.CommandContext(ctx, "cp", "-a", "--", aside+"/.", dir+"/").CombinedOutput(); err != nil {
			return fmt.Errorf("move files into the volume (they are kept in %s): %v: %s", aside, err, strings.TrimSpace(string(out)))
		}
		os.RemoveAll(aside)
	}
	return nil
}

// loopDevice returns the loop device bound to image.
func loopDevice(image string) (string, error) {
	out, err := exec.Command("losetup", "-j", image, "-n", "-O", "NAME").Output()
	if err != nil {
		return "", err
	}
	name := strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	if name == "" {
		return "", fmt.Errorf("no loop device for %s", image)
	}
	return name, nil
}

// mounted reports whether dir is a mount point: on another device than
// its parent.
func mounted(dir string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, err
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, err
	}
	return st.Dev != parent.Dev, nil
}

// Release drops the hold; the last holder unmounts the volume. A sandbox
// that still has the directory bound keeps it until it ends.
func (v *Volume) Release() error {
	if v.lock == nil {
		return nil
	}
	defer func() { v.lock.Close(); v.lock = nil }()
	if unix.Flock(int(v.lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return nil // another holder keeps it mounted
	}
	err := v.unmountAll()
	v.m.unmounted(absPath(v.image))
	return err
}

// Destroy unmounts the volume and deletes its image, dropping what it
// held. It fails while another process holds the volume.
func (v *Volume) Destroy() error {
	if v.lock == nil {
		return fmt.Errorf("volume %s: already released", v.image)
	}
	defer func() { v.lock.Close(); v.lock = nil }()
	if err := unix.Flock(int(v.lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fmt.Errorf("volume %s is in use by another process", v.image)
	}
	if err := v.unmountAll(); err != nil {
		return err
	}
	v.m.unmounted(absPath(v.image))
	os.Remove(v.image + ".lock")
	return os.Remove(v.image)
}

func unmount(dir string) error {
	ok, err := mounted(dir)
	if err != nil || !ok {
		return err
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

// Usage returns what the volume holds and its limits.
func (v *Volume) Usage() (Usage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(v.path, &st); err != nil {
		return Usage{}, err
	}
	bs := int64(st.Bsize)
	return Usage{
		Bytes: (int64(st.Blocks) - int64(st.Bfree)) * bs, BytesLimit: int64(st.Blocks) * bs,
		Inodes: int64(st.Files) - int64(st.Ffree), InodesLimit: int64(st.Files),
	}, nil
}

// flock takes a lock, giving up when ctx ends.
func flock(ctx context.Context, f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// ErrInUse is returned by Move for a volume a running process holds.
var ErrInUse = errors.New("the volume is in use by a running process")

// Move renames a volume that no process holds: its image (when there is
// one) and its mount point directory (when there is one), neither
// replacing anything at the new names. A mount left at the old mount
// point by a killed process is unmounted first. A volume held by a
// running process is ErrInUse: that process would go on using the old
// names.
func Move(image, mountpoint, newImage, newMountpoint string) error {
	if _, err := os.Stat(image); err == nil {
		lock, err := os.OpenFile(image+".lock", os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("volume %s: lock: %w", image, err)
		}
		defer lock.Close()
		if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			return fmt.Errorf("volume %s: %w", image, ErrInUse)
		}
		if err := unmount(mountpoint); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(newImage), 0o700); err != nil {
			return fmt.Errorf("volume %s: %w", newImage, err)
		}
		if err := unix.Renameat2(unix.AT_FDCWD, image, unix.AT_FDCWD, newImage, unix.RENAME_NOREPLACE); err != nil {
			return fmt.Errorf("rename volume %s: %w", image, err)
		}
		// A device still bound to the image (a sandbox of a dead process
		// holding it) now names the new path; its record goes along.
		if dev := readRecord(lock); dev != "" {
			if nl, err := os.OpenFile(newImage+".lock", os.O_RDWR|os.O_CREATE, 0o600); err == nil {
				if unix.Flock(int(nl.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
					writeRecord(nl, dev)
				}
				nl.Close()
			}
		}
		os.Remove(image + ".lock") // whoever waits on it finds no image there
	}
	if _, err := os.Lstat(mountpoint); err == nil {
		if err := unix.Renameat2(unix.AT_FDCWD, mountpoint, unix.AT_FDCWD, newMountpoint, unix.RENAME_NOREPLACE); err != nil {
			return fmt.Errorf("rename %s: %w", mountpoint, err)
		}
	}
	return nil
}

// detachWait bounds how long a volume's set-up waits for the loop device
// of an ending process to go before it skips the offline resize.
const detachWait = 30 * time.Second

// awaitDetached waits, when the image must be resized offline, until no
// loop device holds it. The mount table of this process's namespace says
// nothing of others: a sandbox of a nekro that exited keeps the volume
// bound, and so mounted, until it ends, and resizing (or truncating) an
// image whose filesystem is mounted elsewhere corrupts it when that
// mount's superblock is written back. Loop devices are global, so they
// tell (boundLoop reads them from sysfs). An image that needs no resize
// is not looked at (no cost on the common path).
func (v *Volume) awaitDetached(ctx context.Context, spec Spec) error {
	fi, err := os.Stat(v.image)
	if err != nil {
		return err
	}
	if spec.Bytes <= 0 || fi.Size() == spec.Bytes {
		if sb, err := readSuperblock(v.image); err != nil || !needsRebuild(sb, spec) {
			return nil
		}
	}
	deadline := time.Now().Add(detachWait)
	for {
		dev, err := boundLoop(v.image)
		if err != nil || dev == "" {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still attached to %s after %s", dev, detachWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
