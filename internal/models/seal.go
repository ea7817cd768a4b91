package models

// Model group keys at rest. The keys are sealed with AES-256-GCM under a
// key kept in a file of the data directory (KeyFile), not in the
// database: a dump of the database, or the disk of a PostgreSQL server,
// shows no model key without that file. A process that reads the groups
// (to route a turn, to test a group) opens them with the same file.

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/nekro-go/nekro/internal/files"
)

// KeyFile is the data directory's file, mode 0600, holding the key that
// seals the model groups' keys in the database (created on first use).
// It belongs with the data directory in backups, and every replica on
// one database needs the same one.
const KeyFile = "models.key"

// sealedPrefix starts a sealed key as stored: what follows is the
// base64 of the GCM nonce and the ciphertext.
const sealedPrefix = "nekro-sealed:v1:"

// sealAAD binds a sealed value to its use.
var sealAAD = []byte("nekro model group api key")

// ErrKeyMismatch is the error of opening a sealed key with another
// KeyFile than the one that sealed it.
var ErrKeyMismatch = errors.New("a model group's key was sealed with another " + KeyFile +
	" (copy the models.key of the data directory, or replica, that stored it)")

// LoadKey reads the sealing key at path, creating it (32 random bytes,
// as hex) when missing. Processes starting at once agree on one key: it
// is written under a temporary name and linked into place.
func LoadKey(path string) ([]byte, error) {
	key, err := files.LoadSecret(path, nil)
	if errors.Is(err, files.ErrBadSecret) {
		return nil, fmt.Errorf("%s is not 64 hex digits (restore it from a backup: the model groups' keys cannot be read without it)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("model key file: %w", err)
	}
	return key, nil
}

// sealer seals and opens keys; a nil one keeps them as they are.
type sealer struct{ aead cipher.AEAD }

func newSealer(key []byte) (*sealer, error) {
	if key == nil {
		return nil, nil
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("model key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("model key: %w", err)
	}
	return &sealer{aead: aead}, nil
}

// sealed reports whether v is a sealed key.
func sealed(v string) bool { return strings.HasPrefix(v, sealedPrefix) }

// seal returns v sealed; an empty or already sealed v is returned as it
// is, and so is every v when there is no sealer.
func (s *sealer) seal(v string) string {
	if s == nil || v == "" || sealed(v) {
		return v
	}
	nonce := make([]byte, s.aead.NonceSize())
	rand.Read(nonce)
	return sealedPrefix + base64.RawStdEncoding.EncodeToString(s.aead.Seal(nonce, nonce, []byte(v), sealAAD))
}

// open returns the key v seals; a v not sealed (stored before keys were
// sealed) is returned as it is.
func (s *sealer) open(v string) (string, error) {
	if !sealed(v) {
		return v, nil
	}
	if s == nil {
		return "", fmt.Errorf("a model group's key is sealed, and this process has no %s", KeyFile)
	}
	b, err := base64.RawStdEncoding.DecodeString(strings.TrimPrefix(v, sealedPrefix))
	if err != nil || len(b) < s.aead.NonceSize() {
		return "", fmt.Errorf("a model group's sealed key is damaged")
	}
	plain, err := s.aead.Open(nil, b[:s.aead.NonceSize()], b[s.aead.NonceSize():], sealAAD)
	if err != nil {
		return "", ErrKeyMismatch
	}
	return string(plain), nil
}
