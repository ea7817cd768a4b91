package files

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// LoadSecret reads the 32-byte secret kept as 64 hex digits in the file
// at path (mode 0600), creating it when missing. Several processes may
// start at once on a fresh data directory: the secret is written under a
// temporary name and linked into place, so exactly one wins and every
// process reads that one. beforeCreate, when set, runs before a missing
// file is created and may refuse (a data directory whose files a lost
// secret named). The errors name path; what to do about a damaged file
// is the caller's to say.
func LoadSecret(path string, beforeCreate func() error) ([]byte, error) {
	for range 3 {
		b, err := os.ReadFile(path)
		if err == nil {
			secret, derr := hex.DecodeString(strings.TrimSpace(string(b)))
			if derr != nil || len(secret) != 32 {
				return nil, fmt.Errorf("%s: %w", path, ErrBadSecret)
			}
			return secret, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if beforeCreate != nil {
			if err := beforeCreate(); err != nil {
				return nil, err
			}
		}
		if err := createSecret(path); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%s keeps vanishing", path)
}

// ErrBadSecret is LoadSecret's error for a file that is not 64 hex digits.
var ErrBadSecret = errors.New("not 64 hex digits")

func createSecret(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return err
	}
	var secret [32]byte
	rand.Read(secret[:])
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*") // mode 0600
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(hex.EncodeToString(secret[:]) + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Link(tmp.Name(), path) // ErrExist when another process won
}
