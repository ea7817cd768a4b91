package plugin

import (
	"fmt"
	"os"
)

// DataRoot opens the plugin's private directory, data/plugins/<author>.<module>/,
// as an *os.Root, creating the directory on first use. Close it when done.
//
// Use it for every file whose name the AI or a user can influence: the
// Root refuses any name that would leave the directory ("../x", "/etc/x",
// or a symlink pointing outside), so
//
//	root, err := p.DataRoot()
//	if err != nil {
//		return "", err
//	}
//	defer root.Close()
//	if err := root.MkdirAll("images", 0o755); err != nil {
//		return "", err
//	}
//	err = root.WriteFile("images/"+filename, data, 0o644)
//
// cannot write outside the plugin's directory whatever filename holds,
// where filepath.Join(dir, "images", filename) could. To hand a file to
// the AI, open it from the Root and pass the *os.File to
// ctx.FS().MixedForwardFile.
func (p *Plugin) DataRoot() (*os.Root, error) {
	dir, err := p.DataDir()
	if err != nil {
		return nil, fmt.Errorf("plugin %s: data dir: %w", p.Key(), err)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: data dir: %w", p.Key(), err)
	}
	return r, nil
}
