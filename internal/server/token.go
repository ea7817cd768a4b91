package server

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// tokenFile is the API token's file in the data directory.
const tokenFile = "api_token"

// loadOrCreateToken returns the token stored in dataDir, creating one on
// first start. A new token is written to out, once; later starts only say
// where it is kept.
func loadOrCreateToken(dataDir string, out io.Writer) (string, error) {
	path := filepath.Join(dataDir, tokenFile)
	b, err := os.ReadFile(path)
	if err == nil {
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("api token file %s is empty: delete it to get a new token", path)
		}
		return tok, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("api token: %w", err)
	}
	var raw [32]byte
	rand.Read(raw[:])
	tok := base64.RawURLEncoding.EncodeToString(raw[:])
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) { // another process won the race
			return loadOrCreateToken(dataDir, out)
		}
		return "", fmt.Errorf("api token: %w", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return "", fmt.Errorf("api token: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return "", fmt.Errorf("api token: %w", err)
	}
	if out != nil {
		fmt.Fprintf(out, "nekro: generated the API token (shown once; kept in %s):\n\n    %s\n\n"+
			"Send it as `Authorization: Bearer <token>`, or set %s to choose your own.\n", path, tok, EnvAPIToken)
	}
	return tok, nil
}
