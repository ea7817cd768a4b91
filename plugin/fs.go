package plugin

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
)

// FS is the file bridge between a run's sandbox and the host. The AI's code
// sees two directories:
//
//	/app/uploads/...  the chat's uploads, read-only in the sandbox
//	/app/shared/...   the sandbox's own files, writable in the sandbox
//
// and paths relative to /app (such as "shared/out.txt") mean the same. The
// plugin runs on the host, where those directories live under the data
// directory; FS maps between the two views, one rule each way, and refuses
// every other path with an error that names the allowed prefixes.
//
// # Reading and writing: prefer Open, ReadFile and Create
//
// The sandbox can write anything into /app/shared, symlinks included. A
// host path obtained from GetFile is checked when GetFile returns, but the
// sandboxed code keeps running and can swap a file for a symlink before the
// plugin opens it. Open, ReadFile and Create resolve the path and open the
// file in one step beneath the right directory (an os.Root), so a symlink
// that leads out of it is refused at the moment of use. Use GetFile only to
// hand a path to code that insists on a path name.
//
// # Seed helpers
//
// The Python reference's path helpers map to FS as follows:
//
//	convert_to_host_path(sandbox_path, chat_key)     GetFile(sandboxPath)
//	convert_filename_to_access_path(name, chat_key)  UploadFilePath(name)
//	convert_filename_to_sandbox_upload_path(name)    SandboxUploadPath(name)
//	convert_to_container_path(host_path)             ForwardFile(hostPath)
//	is_url_path(s)                                    IsURL(s)
//	_ctx.fs.get_file / forward_file / mixed_forward_file
//	                                                  GetFile / ForwardFile / MixedForwardFile
//
// Every error is meant to be shown to the AI's code: it names sandbox paths,
// never host ones.
type FS interface {
	// ChatKey returns the key of the run's chat.
	ChatKey() string
	// ContainerKey returns the key of the run's sandbox.
	ContainerKey() string
	// SharedPath returns the host directory seen as /app/shared.
	SharedPath() string
	// UploadPath returns the host directory seen as /app/uploads.
	UploadPath() string

	// GetFile maps a sandbox path to a host path, resolving symlinks, and
	// refuses a path whose resolved target leaves /app/shared or
	// /app/uploads. The file need not exist. See the type's comment for why
	// Open, ReadFile and Create are safer.
	GetFile(sandboxPath string) (string, error)
	// Open opens a sandbox path for reading, beneath its directory.
	Open(sandboxPath string) (*os.File, error)
	// ReadFile reads the whole file at a sandbox path, beneath its directory.
	ReadFile(sandboxPath string) ([]byte, error)
	// Create creates or truncates the file at a sandbox path for writing,
	// beneath its directory, making missing parent directories. Files made
	// in /app/shared belong to the sandbox's user, so the code can change
	// or delete them.
	Create(sandboxPath string) (*os.File, error)

	// ForwardFile returns the sandbox path of a host file that already lies
	// in this run's shared or uploads directory, without copying it. Any
	// other host path is an error.
	ForwardFile(hostPath string) (string, error)
	// MixedForwardFile puts a file into the sandbox's /app/shared directory
	// and returns its sandbox path ("/app/shared/<name>"). src is one of:
	//
	//   - a string starting with http:// or https://: downloaded, with the
	//     size cap, timeout and private-address refusal of Download;
	//   - a string starting with data:: decoded (base64 or percent-encoded);
	//   - a []byte: written as is;
	//   - an io.Reader, such as an *os.File opened from DataRoot: streamed;
	//   - any other string: a host path. A file already in this run's shared
	//     or uploads directory is forwarded without a copy (as ForwardFile);
	//     a file in the calling plugin's data directory is copied, opened
	//     beneath that directory. Other host paths are refused, so a path
	//     the AI made up cannot pull a host file into the sandbox.
	//
	// fileName names the file in /app/shared; it is sanitized to one safe
	// name (separators, NUL and control characters become "_", "." and ".."
	// are refused, long names are shortened). When empty, the name comes
	// from the URL, the source file or a hash of the content. The file
	// appears complete or not at all: a failed or oversized copy leaves
	// nothing behind. An existing file of that name is replaced.
	//
	// Unlike the Python reference, which put downloads in /app/uploads,
	// every copy lands in /app/shared as the seed documents: uploads stay
	// the user's files, read-only to the sandbox.
	MixedForwardFile(ctx context.Context, src any, fileName string) (string, error)
	// Download fetches an http(s) URL into w and returns the bytes written.
	// It refuses loopback, private, link-local and other non-public
	// addresses unless the operator allows them, follows at most 5
	// redirects (each checked), stops at the size cap with an error, and
	// gives up after the download timeout.
	Download(ctx context.Context, url string, w io.Writer) (int64, error)

	// UploadFilePath returns the host path of file name in the chat's
	// uploads directory (data/uploads/<chat>/<name>), name sanitized as in
	// MixedForwardFile. Prefer Create(SandboxUploadPath(name)).
	UploadFilePath(name string) (string, error)
	// SandboxUploadPath returns "/app/uploads/<name>", name sanitized.
	SandboxUploadPath(name string) (string, error)
}

// IsURL reports whether s is an http or https URL (the reference's
// is_url_path).
func IsURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// FS returns the run's file bridge, seen from the calling plugin: host paths
// given to MixedForwardFile may point into this plugin's data directory.
func (c *Ctx) FS() FS {
	if fs := c.env.FilesOf(c.plugin); fs != nil {
		return fs
	}
	return noFS{}
}

// noFS is the FS of a run without one: every call fails with ErrNoService.
type noFS struct{}

func (noFS) ChatKey() string                       { return "" }
func (noFS) ContainerKey() string                  { return "" }
func (noFS) SharedPath() string                    { return "" }
func (noFS) UploadPath() string                    { return "" }
func (noFS) GetFile(string) (string, error)        { return "", errNoFS }
func (noFS) Open(string) (*os.File, error)         { return nil, errNoFS }
func (noFS) ReadFile(string) ([]byte, error)       { return nil, errNoFS }
func (noFS) Create(string) (*os.File, error)       { return nil, errNoFS }
func (noFS) ForwardFile(string) (string, error)    { return "", errNoFS }
func (noFS) UploadFilePath(string) (string, error) { return "", errNoFS }
func (noFS) SandboxUploadPath(string) (string, error) {
	return "", errNoFS
}
func (noFS) MixedForwardFile(context.Context, any, string) (string, error) {
	return "", errNoFS
}
func (noFS) Download(context.Context, string, io.Writer) (int64, error) {
	return 0, errNoFS
}

var errNoFS = fmt.Errorf("file bridge: %w", ErrNoService)
