package files

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nekro-go/nekro/internal/volume"
)

// NameKeyFile is the data directory's secret, mode 0600, that names the
// chats' directories (created on first use). Losing it loses the way
// from a chat to its uploads and shared files: it belongs with the data
// directory in backups.
const NameKeyFile = "names.key"

// chatDirName is the opaque directory name of key in area: an HMAC-SHA256
// under the data directory's secret. A chat's directories are mount
// points (their volumes), and /proc/self/mountinfo, /sys/block/loop*/
// and the sandboxes' command lines are readable by every host user; a
// chat key such as onebot_v11-private_<QQ number> must not show there. A
// plain hash of a QQ number would be brute-forced in seconds; the keyed
// one cannot be without the secret.
func (l Layout) chatDirName(area, key string) string {
	secret := l.nameKey
	if secret == "" {
		var err error
		if secret, err = loadNameKey(l.Root); err != nil {
			// Only a Layout not made by OpenLayout gets here (tests,
			// tools): OpenLayout reports this error instead.
			panic(fmt.Sprintf("files: a Layout of %s without its name key: %v (use OpenLayout)", l.Root, err))
		}
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(area + "\x00" + key))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// OpenLayout is NewLayout for a process that uses the chats' directories:
// it creates the data directory (mode 0711) when missing and reads, or on
// first use creates, the secret that names those directories.
func OpenLayout(dir string) (Layout, error) {
	l, err := NewLayout(dir)
	if err != nil {
		return Layout{}, err
	}
	if l.nameKey, err = loadNameKey(l.Root); err != nil {
		return Layout{}, err
	}
	return l, nil
}

// loadNameKey reads root's name key, creating it when missing (see
// LoadSecret: processes starting at once agree on one key), unless chat
// directories named by a lost key exist.
func loadNameKey(root string) (string, error) {
	path := filepath.Join(root, NameKeyFile)
	var refused error
	secret, err := LoadSecret(path, func() error {
		if named := keyedChatDirs(root); named != "" {
			// A new key would orphan every chat's files silently.
			refused = fmt.Errorf("%s is missing, but chat directories named by it exist (%s): restore it from a backup of the data directory; a new key would lose every chat's files", path, named)
			return refused
		}
		return nil
	})
	if refused != nil {
		return "", fmt.Errorf("data dir: %w", refused)
	}
	if errors.Is(err, ErrBadSecret) {
		return "", fmt.Errorf("data dir: %s is not 64 hex digits (restore it from a backup; removing it loses every chat's files)", path)
	}
	if err != nil {
		return "", fmt.Errorf("data dir: name key: %w", err)
	}
	return hex.EncodeToString(secret), nil
}

// keyedChatDirs returns one chat directory (or volume image) named by a
// name key, or "" when there is none: a data directory that has them
// lost its key.
func keyedChatDirs(root string) string {
	for _, area := range []string{"uploads", "sandboxes", filepath.Join("volumes", "chats"), filepath.Join("volumes", "uploads"), filepath.Join("volumes", "shared")} {
		entries, _ := os.ReadDir(filepath.Join(root, area))
		for _, e := range entries {
			name := strings.TrimSuffix(e.Name(), ".img")
			if len(name) == 32 && strings.Trim(name, "0123456789abcdef") == "" {
				return filepath.Join(area, e.Name())
			}
		}
	}
	return ""
}

// adoptLegacy gives dir what a previous version kept at legacy, the
// directory named after the chat key (and its volume image): both are
// renamed, once, under a lock shared by every nekro process of the data
// directory. A legacy volume still mounted (left by a killed process) is
// unmounted first; one held by a running process is an error, as that
// process (an older nekro) would keep using the old name.
func (l Layout) adoptLegacy(legacy, dir string) error {
	if legacy == dir {
		return nil
	}
	if _, err := os.Lstat(dir); err == nil {
		return nil
	}
	legacyImage, _ := l.VolumeImage(legacy)
	image, _ := l.VolumeImage(dir)
	if !exists(legacy) && !exists(legacyImage) {
		return nil
	}
	lock, err := os.Open(filepath.Join(l.Root, NameKeyFile))
	if err != nil {
		return fmt.Errorf("rename %s: %w", legacy, err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("rename %s: lock: %w", legacy, err)
	}
	if exists(dir) || (!exists(legacy) && !exists(legacyImage)) {
		return nil // another process did it meanwhile
	}
	if err := volume.Move(legacyImage, legacy, image, dir); err != nil {
		return fmt.Errorf("rename %s to %s: %w", legacy, filepath.Base(dir), err)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
