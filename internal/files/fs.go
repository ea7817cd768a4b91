package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	"github.com/nekro-go/nekro/internal/keys"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/plugin"
)

// Defaults of Options.
const (
	DefaultMaxDownloadBytes = 100 << 20 // 100 MiB
	DefaultDownloadTimeout  = 60 * time.Second
	// AllowPrivateEnv names the environment variable an operator sets to
	// "1" (or "true") to let downloads reach loopback, private and
	// link-local addresses.
	AllowPrivateEnv = "NEKRO_ALLOW_PRIVATE_DOWNLOADS"
)

// Options tune a run's file bridge. The zero value is the safe default.
type Options struct {
	// MaxDownloadBytes caps what a download or a data: URI may write;
	// zero means DefaultMaxDownloadBytes. Files the plugin already holds
	// (host files, bytes, readers) are not capped.
	MaxDownloadBytes int64
	// DownloadTimeout bounds one download, from dialing to the last byte;
	// zero means DefaultDownloadTimeout.
	DownloadTimeout time.Duration
	// AllowPrivateNetworks lets downloads reach loopback, private,
	// link-local and other non-public addresses. Off by default: the AI
	// chooses the URLs, and the host can reach what the sandbox cannot.
	AllowPrivateNetworks bool
	// AllowHosts are host:port pairs (as the URL names them, before DNS)
	// downloads may reach even on a private address: a chat platform's
	// own file server (--onebot-file-hosts). Everything else keeps the
	// guard; redirects are judged anew at each hop.
	AllowHosts []string
}

// FS is the file bridge of one run: it implements plugin.FS over the data
// directory's layout. Build it with NewFS when the run starts.
type FS struct {
	layout    Layout
	run       plugin.RunInfo
	opts      Options
	pluginKey string // set by ForPlugin: the plugin whose data dir MixedForwardFile may read
	dl        *downloader
}

var containerKeyRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,200}$`)

// NewFS returns the file bridge of the run described by run. An empty
// run.ContainerKey means the chat's default sandbox, ContainerKey(chatKey).
func NewFS(l Layout, run plugin.RunInfo, opts Options) (*FS, error) {
	if err := keys.Scope("chat", run.ChatKey); err != nil {
		return nil, fmt.Errorf("file bridge: %w", err)
	}
	if run.ContainerKey == "" {
		run.ContainerKey = ContainerKey(run.ChatKey)
	}
	if !containerKeyRE.MatchString(run.ContainerKey) || run.ContainerKey == "." || run.ContainerKey == ".." {
		return nil, fmt.Errorf("file bridge: container key %q is not a safe directory name", run.ContainerKey)
	}
	if opts.MaxDownloadBytes <= 0 {
		opts.MaxDownloadBytes = DefaultMaxDownloadBytes
	}
	if opts.DownloadTimeout <= 0 {
		opts.DownloadTimeout = DefaultDownloadTimeout
	}
	return &FS{layout: l, run: run, opts: opts, dl: newDownloader(opts)}, nil
}

var _ pluginhost.PluginFS = (*FS)(nil)

// ForPlugin returns a view of f for the plugin with the given key: host
// paths in that plugin's data directory become valid sources of
// MixedForwardFile. plugin.Ctx.FS calls it.
func (f *FS) ForPlugin(key string) plugin.FS {
	g := *f
	g.pluginKey = key
	return &g
}

// ChatKey returns the key of the run's chat.
func (f *FS) ChatKey() string { return f.run.ChatKey }

// ContainerKey returns the key of the run's sandbox.
func (f *FS) ContainerKey() string { return f.run.ContainerKey }

// SharedPath returns the host directory seen as /app/shared.
func (f *FS) SharedPath() string { return f.layout.SharedDir(f.run.ContainerKey) }

// UploadPath returns the host directory seen as /app/uploads.
func (f *FS) UploadPath() string { return f.layout.UploadsDir(f.run.ChatKey) }

func (f *FS) dir(a Area) string {
	if a == Uploads {
		return f.UploadPath()
	}
	return f.SharedPath()
}

// root opens the directory of area a as an os.Root, creating it first when
// create is set.
func (f *FS) root(a Area, create bool) (*os.Root, error) {
	dir := f.dir(a)
	if create {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("%s: %w", a, errOnly(err))
		}
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a, errOnly(err))
	}
	return r, nil
}

// GetFile maps a sandbox path to the host path of its resolved target.
func (f *FS) GetFile(sandboxPath string) (string, error) {
	a, rel, err := ParseSandboxPath(sandboxPath)
	if err != nil {
		return "", err
	}
	r, err := f.root(a, false)
	if errors.Is(err, fs.ErrNotExist) {
		return filepath.Join(f.dir(a), rel), nil // nothing there, so no symlinks
	}
	if err != nil {
		return "", err
	}
	defer r.Close()
	res, err := resolveBeneath(r, rel)
	if err != nil {
		return "", fmt.Errorf("%s: %w", sandboxPath, err)
	}
	return filepath.Join(f.dir(a), res), nil
}

// Open opens the file at a sandbox path for reading.
func (f *FS) Open(sandboxPath string) (*os.File, error) {
	a, rel, err := ParseSandboxPath(sandboxPath)
	if err != nil {
		return nil, err
	}
	r, err := f.root(a, false)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", sandboxPath, err)
	}
	defer r.Close()
	file, err := openNoBlock(r, rel, os.O_RDONLY, 0)
	if err != nil {
		return nil, f.opError("open", sandboxPath, r, rel, err)
	}
	return file, nil
}

// ReadFile reads the file at a sandbox path.
func (f *FS) ReadFile(sandboxPath string) ([]byte, error) {
	a, rel, err := ParseSandboxPath(sandboxPath)
	if err != nil {
		return nil, err
	}
	r, err := f.root(a, false)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", sandboxPath, err)
	}
	defer r.Close()
	file, err := openNoBlock(r, rel, os.O_RDONLY, 0)
	if err != nil {
		return nil, f.opError("read", sandboxPath, r, rel, err)
	}
	defer file.Close()
	b, err := io.ReadAll(file)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", sandboxPath, errOnly(err))
	}
	return b, nil
}

// Create creates or truncates the file at a sandbox path, making missing
// parent directories.
func (f *FS) Create(sandboxPath string) (*os.File, error) {
	a, rel, err := ParseSandboxPath(sandboxPath)
	if err != nil {
		return nil, err
	}
	if rel == "." {
		return nil, fmt.Errorf("create %s: is a directory", sandboxPath)
	}
	r, err := f.root(a, true)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", sandboxPath, err)
	}
	defer r.Close()
	own := ownerOf(r, a)
	if err := mkdirAllRooted(r, filepath.Dir(rel), own); err != nil {
		return nil, f.opError("create", sandboxPath, r, rel, err)
	}
	file, err := openNoBlock(r, rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, f.opError("create", sandboxPath, r, rel, err)
	}
	if err := own.chown(file); err != nil {
		file.Close()
		return nil, fmt.Errorf("create %s: %w", sandboxPath, err)
	}
	return file, nil
}

// ForwardFile returns the sandbox path of a host file already in the run's
// shared or uploads directory.
func (f *FS) ForwardFile(hostPath string) (string, error) {
	a, rel, ok := f.areaOf(hostPath)
	if !ok {
		return "", refuse("host file %q is not in this run's shared or uploads directory; use MixedForwardFile to copy it", filepath.Base(hostPath))
	}
	sp := SandboxPath(a, rel)
	r, err := f.root(a, false)
	if err != nil {
		return "", fmt.Errorf("forward %s: %w", sp, err)
	}
	defer r.Close()
	if _, err := r.Stat(rel); err != nil {
		return "", f.opError("forward", sp, r, rel, err)
	}
	return sp, nil
}

// areaOf finds the area and relative path of an absolute host path lying
// lexically in the run's shared or uploads directory.
func (f *FS) areaOf(hostPath string) (Area, string, bool) {
	if !filepath.IsAbs(hostPath) {
		return 0, "", false
	}
	for _, a := range []Area{Shared, Uploads} {
		rel, err := filepath.Rel(f.dir(a), filepath.Clean(hostPath))
		if err == nil && (rel == "." || filepath.IsLocal(rel)) {
			return a, rel, true
		}
	}
	return 0, "", false
}

// UploadFilePath returns the host path of name in the chat's uploads
// directory.
func (f *FS) UploadFilePath(name string) (string, error) {
	n, err := SanitizeFileName(name)
	if err != nil {
		return "", err
	}
	return filepath.Join(f.UploadPath(), n), nil
}

// SandboxUploadPath returns "/app/uploads/<name>", name sanitized.
func (f *FS) SandboxUploadPath(name string) (string, error) {
	n, err := SanitizeFileName(name)
	if err != nil {
		return "", err
	}
	return SandboxPath(Uploads, n), nil
}

// opError turns an error of an os.Root call into one for the AI: it names
// the sandbox path, drops the host path, and marks a refused escape with
// plugin.ErrPathRefused.
func (f *FS) opError(op, sandboxPath string, r *os.Root, rel string, err error) error {
	if errors.Is(err, plugin.ErrPathRefused) {
		return fmt.Errorf("%s %s: %w", op, sandboxPath, err)
	}
	if !errors.Is(err, fs.ErrNotExist) && escapes(r, rel) {
		return fmt.Errorf("%s %s: %w: a symlink leads out of %s", op, sandboxPath, plugin.ErrPathRefused, areaOfPath(sandboxPath))
	}
	return fmt.Errorf("%s %s: %w", op, sandboxPath, errOnly(err))
}

func areaOfPath(sandboxPath string) string {
	a, _, err := ParseSandboxPath(sandboxPath)
	if err != nil {
		return "its directory"
	}
	return a.String()
}

// errOnly strips the path from an *fs.PathError or *os.LinkError, which
// may be a host path, keeping the cause for errors.Is.
func errOnly(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// owner is who should own what the host creates in an area: in /app/shared
// the sandbox's user, so its code can change what the plugin wrote.
type owner struct {
	uid, gid int
	set      bool
}

func ownerOf(r *os.Root, a Area) owner {
	if a != Shared || os.Geteuid() != 0 {
		return owner{}
	}
	fi, err := r.Stat(".")
	if err != nil {
		return owner{}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || (st.Uid == 0 && st.Gid == 0) {
		return owner{}
	}
	return owner{uid: int(st.Uid), gid: int(st.Gid), set: true}
}

func (o owner) chown(file *os.File) error {
	if !o.set {
		return nil
	}
	if err := file.Chown(o.uid, o.gid); err != nil {
		return fmt.Errorf("chown: %w", errOnly(err))
	}
	return nil
}

// mkdirAllRooted makes dir and its parents beneath r, each owned by o.
func mkdirAllRooted(r *os.Root, dir string, o owner) error {
	if dir == "." || dir == "" {
		return nil
	}
	cur := ""
	for _, c := range splitPath(dir) {
		cur = filepath.Join(cur, c)
		err := r.Mkdir(cur, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		if o.set {
			// Lchown: if the sandbox swapped the new directory for a
			// symlink, only the link changes owner.
			if err := r.Lchown(cur, o.uid, o.gid); err != nil {
				return err
			}
		}
	}
	return nil
}

// errNotRegular refuses FIFOs, sockets and devices the sandbox planted.
var errNotRegular = errors.New("not a regular file or directory")

// openNoBlock opens name beneath r without blocking: a FIFO planted by the
// sandbox would otherwise hang the open (and the plugin's call) until
// someone opens its other end. Only regular files and, for reading,
// directories are returned.
func openNoBlock(r *os.Root, name string, flag int, perm os.FileMode) (*os.File, error) {
	file, err := r.OpenFile(name, flag|syscall.O_NONBLOCK, perm)
	if err != nil {
		return nil, err
	}
	fi, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() && !(fi.IsDir() && flag&(os.O_WRONLY|os.O_RDWR) == 0) {
		file.Close()
		return nil, errNotRegular
	}
	return file, nil
}

// readerCtx stops a copy when ctx is done.
type readerCtx struct {
	ctx context.Context
	r   io.Reader
}

func (rc readerCtx) Read(p []byte) (int, error) {
	if err := rc.ctx.Err(); err != nil {
		return 0, err
	}
	return rc.r.Read(p)
}

var _ plugin.FS = (*FS)(nil)
