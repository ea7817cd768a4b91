package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/sandbox"
)

// trustPackageLayer is called before any sandbox of the chat starts and
// before its installer runs. Runs see the chat's package layer read-only
// and only the installer writes it (sandbox.EnsurePackagesDir); an older
// nekro let runs write it, so a layer this data directory has no record of
// (files.Layout.PackagesRecord, which no sandbox can reach) may hold code
// one user's run planted for the next user's imports, and nothing in it
// tells such code from an installed package (a run could write fake
// metadata too). Such a layer is emptied once, and the record written:
// the chat's packages are installed again by its next `pip install`.
func (rt *Runtime) trustPackageLayer(chatKey, shared string) error {
	containerKey := files.ContainerKey(chatKey)
	if _, ok := rt.layers.Load(containerKey); ok {
		return nil
	}
	rt.layerMu.Lock()
	defer rt.layerMu.Unlock()
	if _, ok := rt.layers.Load(containerKey); ok {
		return nil
	}
	record := rt.layout.PackagesRecord(containerKey)
	_, err := os.Lstat(record)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("the record of chat %q's package layer: %w", chatKey, err)
	}
	if err != nil {
		layer := filepath.Join(shared, sandbox.PackagesDirName)
		if _, err := os.Lstat(layer); err == nil {
			// RemoveAll neither follows nor keeps a symlink in the way.
			if err := os.RemoveAll(layer); err != nil {
				return fmt.Errorf("empty chat %q's package layer, which runs of an older nekro could write: %w", chatKey, err)
			}
			rt.log.Warn("emptied a package layer an older nekro let runs write: the chat installs its packages again",
				"chat", chatKey, "layer", layer)
		}
		if err := os.MkdirAll(filepath.Dir(record), 0o700); err != nil {
			return fmt.Errorf("the record of chat %q's package layer: %w", chatKey, err)
		}
		if err := os.WriteFile(record, []byte("written by nekro's installer only\n"), 0o600); err != nil {
			return fmt.Errorf("the record of chat %q's package layer: %w", chatKey, err)
		}
	}
	rt.layers.Store(containerKey, struct{}{})
	return nil
}
