// Package files owns the data directory's layout and every mapping between
// sandbox paths and host paths.
package files

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/nekro-go/nekro/internal/keys"
)

// Layout names the places under a data directory:
//
//	<root>/nekro.db                       SQLite: KV, chats, messages, runs
//	<root>/names.key                      the secret naming chats' directories
//	<root>/plugins/<author>.<module>/     a plugin's private directory
//	<root>/uploads/<name>/                a chat's uploads  -> /app/uploads (ro)
//	<root>/sandboxes/<name>/              a sandbox's shared -> /app/shared (rw)
//	<root>/volumes/                       filesystem images bounding the above:
//	                                      chats/<name>.img a chat's two directories,
//	                                      plugins/<name>.img a plugin's; uploads/ and
//	                                      shared/ hold the one-directory images of
//	                                      chats from before, kept as they are
//	<root>/layers/<name>                  the host's record that a chat's package
//	                                      layer holds only what nekro's installer put there
//	<root>/runs/<pid>/<run_id>/           a run's socket and stubs (Docker only)
//
// A chat's directories are named by a keyed hash of its chat key (or its
// sandbox's container key), never by the key: they are mount points, and
// every host user can read the mount table. See chatDirName.
type Layout struct {
	Root string // absolute
	// Provision, when set, prepares each chat and plugin directory as it
	// is first used: owned by the chat's own uid, and on a filesystem of
	// its own that bounds its size. Nil leaves plain directories of the
	// host user.
	Provision Provisioner
	// nameKey is the secret of NameKeyFile, read by OpenLayout; a Layout
	// without it reads the file on each use.
	nameKey string
}

// Provisioner prepares the directories sandboxes and plugins write to;
// the runtime provides it. Both methods are called on every Ensure and
// must be cheap once a directory is ready.
type Provisioner interface {
	// ProvideChatDir makes dir, an existing empty or prepared directory,
	// ready as chatKey's directory of the given kind.
	ProvideChatDir(kind Area, chatKey, dir string) error
	// ProvidePluginDir makes dir ready as the plugin's private directory.
	ProvidePluginDir(pluginKey, dir string) error
}

// NewLayout returns the layout of the data directory dir, made absolute.
func NewLayout(dir string) (Layout, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Layout{}, fmt.Errorf("data dir %s: %w", dir, err)
	}
	return Layout{Root: abs}, nil
}

// VolumesDir holds the filesystem images of chats and plugins.
func (l Layout) VolumesDir() string { return filepath.Join(l.Root, "volumes") }

// VolumeImage is the filesystem image that holds dir, a chat's uploads or
// shared directory or a plugin's directory, when volumes bound them; false
// for any other directory.
func (l Layout) VolumeImage(dir string) (string, bool) {
	rel, err := filepath.Rel(l.Root, dir)
	if err != nil {
		return "", false
	}
	area, name, ok := strings.Cut(filepath.ToSlash(rel), "/")
	if !ok || name == "" || strings.Contains(name, "/") || name == ".." {
		return "", false
	}
	sub := map[string]string{"uploads": "uploads", "sandboxes": "shared", "plugins": "plugins"}[area]
	if sub == "" {
		return "", false
	}
	return filepath.Join(l.VolumesDir(), sub, name+".img"), true
}

// ChatVolumeImage is the filesystem image that holds both directories of
// the chat whose sandbox is containerKey's (its shared and uploads
// directories are bound from it), when volumes bound them. A chat that an
// earlier version gave an image per directory (VolumeImage) keeps those.
func (l Layout) ChatVolumeImage(containerKey string) string {
	return filepath.Join(l.VolumesDir(), "chats", l.chatDirName("sandboxes", containerKey)+".img")
}

// ChatVolumeImages lists the chats' volume images (ChatVolumeImage),
// without the empty image new ones are copied from.
func (l Layout) ChatVolumeImages() []string {
	images, _ := filepath.Glob(filepath.Join(l.VolumesDir(), "chats", "[^.]*.img"))
	return images
}

// Database is the path of the embedded SQLite database.
func (l Layout) Database() string { return filepath.Join(l.Root, "nekro.db") }

// PluginDir is the private directory of the plugin with the given key.
func (l Layout) PluginDir(pluginKey string) string {
	return filepath.Join(l.Root, "plugins", pluginKey)
}

// UploadsDir is the host directory seen as /app/uploads by chatKey's runs.
func (l Layout) UploadsDir(chatKey string) string {
	return filepath.Join(l.Root, "uploads", l.chatDirName("uploads", chatKey))
}

// legacyUploadsDir is where versions before opaque names kept it.
func (l Layout) legacyUploadsDir(chatKey string) string {
	return filepath.Join(l.Root, "uploads", SanitizeChatKey(chatKey))
}

// HasUploadsDir reports whether chatKey has an uploads directory (under
// its current name or the one a previous version gave it), without
// creating one.
func (l Layout) HasUploadsDir(chatKey string) bool {
	return exists(l.UploadsDir(chatKey)) || exists(l.legacyUploadsDir(chatKey))
}

// EnsureUploadsDir creates the chat's uploads directory, mode 0700, and
// has it provisioned (owned by the chat's uid where the sandbox runs as
// one), and returns it. Other host users can neither list nor read a
// chat's files.
func (l Layout) EnsureUploadsDir(chatKey string) (string, error) {
	return l.ensureChatDir(Uploads, chatKey, l.UploadsDir(chatKey))
}

// EnsureSharedDir is EnsureUploadsDir for the chat's sandbox's shared
// directory.
func (l Layout) EnsureSharedDir(chatKey string) (string, error) {
	return l.ensureChatDir(Shared, chatKey, l.SharedDir(ContainerKey(chatKey)))
}

// ensureChatDir creates dir, the chat's directory of the given kind. When
// dir is missing, both of the chat's directories are first renamed from
// where a previous version named them after the key, if it did: one
// volume may hold both (ChatVolumeImage), and making it makes both mount
// points. (Once dir exists, that was done: it costs a run nothing.)
func (l Layout) ensureChatDir(kind Area, chatKey, dir string) (string, error) {
	if exists(dir) {
		return l.provideChatDir(kind, chatKey, dir)
	}
	ck := ContainerKey(chatKey)
	for _, d := range []struct{ legacy, dir string }{
		{l.legacyUploadsDir(chatKey), l.UploadsDir(chatKey)},
		{filepath.Join(l.Root, "sandboxes", ck), l.SharedDir(ck)},
	} {
		if err := os.MkdirAll(filepath.Dir(d.dir), 0o711); err != nil {
			return "", fmt.Errorf("%s: %w", kind, err)
		}
		if err := l.adoptLegacy(d.legacy, d.dir); err != nil {
			return "", fmt.Errorf("%s of chat %q: %w", kind, chatKey, err)
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("%s: %w", kind, err)
	}
	return l.provideChatDir(kind, chatKey, dir)
}

// provideChatDir has the existing dir provisioned, when a Provisioner is
// set, and returns it.
func (l Layout) provideChatDir(kind Area, chatKey, dir string) (string, error) {
	if l.Provision != nil {
		if err := l.Provision.ProvideChatDir(kind, chatKey, dir); err != nil {
			return "", fmt.Errorf("%s of chat %q: %w", kind, chatKey, err)
		}
	}
	return dir, nil
}

// SharedDir is the host directory seen as /app/shared by the sandbox.
func (l Layout) SharedDir(containerKey string) string {
	return filepath.Join(l.Root, "sandboxes", l.chatDirName("sandboxes", containerKey))
}

// PackagesRecord is the host's record, outside every sandbox, that the
// package layer in containerKey's shared directory has been written by
// nekro's installer alone since it was emptied (runtime's
// trustPackageLayer). It is named as the shared directory is: opaquely
// (see chatDirName), as nothing under the data directory may name a chat.
func (l Layout) PackagesRecord(containerKey string) string {
	return filepath.Join(l.Root, "layers", l.chatDirName("sandboxes", containerKey))
}

// RunsDir holds one directory per running sandbox run.
func (l Layout) RunsDir() string { return filepath.Join(l.Root, "runs") }

// hashSuffix is what SanitizeChatKey appends; a key that already ends so
// is hashed too, so a kept key can never equal another key's hashed form.
var hashSuffix = regexp.MustCompile(`-[0-9a-f]{12}$`)

// SanitizeChatKey turns a chat key into a safe name: the one rule for
// names derived from a chat key that may be read (container keys, plugins'
// per-chat subdirectories); the chat's own directories, mount points, are
// named opaquely (chatDirName) and were named by this rule before. Characters outside [A-Za-z0-9_.-] become "_". Because
// that is lossy ("a:b" and "a_b" would collide) and because "." and ".."
// are not safe names, any key that had to change, starts with ".", is
// long, or already ends like a hash suffix gets a hash of the original
// appended. Kept keys never end in a hash suffix and hashed ones always
// do, so distinct keys never share a directory.
func SanitizeChatKey(chatKey string) string {
	var b strings.Builder
	for _, r := range chatKey {
		if r < utf8.RuneSelf && (r == '_' || r == '.' || r == '-' ||
			'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == chatKey && s != "" && !strings.HasPrefix(s, ".") && len(s) <= 64 && !hashSuffix.MatchString(s) {
		return s
	}
	sum := sha256.Sum256([]byte(chatKey))
	s = strings.TrimLeft(s, ".")
	if len(s) > 48 {
		s = s[:48]
	}
	if s == "" {
		s = "chat"
	}
	return s + "-" + hex.EncodeToString(sum[:6])
}

// ContainerKey is the sandbox key of a chat: "sandbox_" + its sanitized key.
func ContainerKey(chatKey string) string { return "sandbox_" + SanitizeChatKey(chatKey) }

// EnsurePluginDir returns the private directory of the plugin with the
// given key (author.module), creating it, mode 0700, on first use. It
// refuses a key that is not two identifiers joined by a dot, and a
// directory that has been replaced by a symlink or a file.
func (l Layout) EnsurePluginDir(pluginKey string) (string, error) {
	if err := keys.Plugin(pluginKey); err != nil {
		return "", err
	}
	parent := filepath.Join(l.Root, "plugins")
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("plugin %s: data dir: %w", pluginKey, err)
	}
	dir := l.PluginDir(pluginKey)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("plugin %s: data dir: %w", pluginKey, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("plugin %s: data dir: %w", pluginKey, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("plugin %s: data dir %s is not a directory", pluginKey, dir)
	}
	if l.Provision != nil {
		if err := l.Provision.ProvidePluginDir(pluginKey, dir); err != nil {
			return "", fmt.Errorf("plugin %s: data dir: %w", pluginKey, err)
		}
	}
	return dir, nil
}
