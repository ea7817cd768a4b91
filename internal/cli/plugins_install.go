package cli

import (
	"archive/zip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/pyplugin"
	"github.com/nekro-go/nekro/internal/pysig"
)

// Bounds of what an installed plugin may unpack to (a zip bomb stops
// here).
const (
	maxInstallBytes = 512 << 20
	maxInstallFiles = 20000
	gitCloneTimeout = 5 * time.Minute
)

// pluginNameRE is a plugin's directory (or file) name: it is imported as
// a Python module, and names starting with "_" or "." are not plugins.
var pluginNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}$`)

func newPluginsInstallCmd(g *globals) *cobra.Command {
	var name string
	var force bool
	cmd := &cobra.Command{
		Use:   "install SOURCE",
		Short: "Install a Python plugin from a directory, a .py file, a .zip or a git repository",
		Long: `Install a Python plugin (written to the Nekro Agent plugin API) into the
plugin directory: the first --plugin-dir, or data/plugins-py/ when none is
given (always searched for plugins, after the --plugin-dir directories).

SOURCE is a package directory (with __init__.py), a single .py file, a .zip
of either (one top directory in it is fine, as in a repository archive), or
a git repository: an URL (https://, ssh://, git@host:..., file://) or the
path of a local repository, cloned with the system's git (--depth 1). The
plugin's name (its directory or file name) comes from SOURCE, with "-" read
as "_"; --name chooses another. Zip entries with ".." or absolute paths,
symbolic links anywhere, and names that are not identifiers are refused.

The plugin is then loaded as nekro serve would load it: its requirements
(requirements.txt, pyproject.toml) are installed into its own environment
from --python-index, and it must import and describe itself; if it does not,
it is not installed (an existing one, replaced with --force, is put back).
A running nekro serve loads it within a few seconds.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := g.config()
			dest := app.InstalledPluginsDir(cfg.DataDir)
			if len(cfg.PluginDirs) > 0 {
				dest = cfg.PluginDirs[0]
			}
			return installPlugin(cmd.Context(), cmd.OutOrStdout(), cfg, args[0], dest, name, force)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the plugin's directory name under the plugin directory (default: from SOURCE)")
	cmd.Flags().BoolVar(&force, "force", false, "replace a plugin of that name already installed")
	return cmd
}

// installPlugin stages src in dest, moves it into place as name and loads
// it once to check it.
func installPlugin(ctx context.Context, out io.Writer, cfg app.Config, src, dest, name string, force bool) error {
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return fmt.Errorf("plugin directory: %w", err)
	}
	// Staged beside its place (a rename then puts it there at once); the
	// leading "." keeps the watcher of a running nekro off it.
	stage, err := os.MkdirTemp(dest, ".install-")
	if err != nil {
		return fmt.Errorf("plugin directory: %w", err)
	}
	defer os.RemoveAll(stage)
	staged, guess, err := stageSource(ctx, src, stage)
	if err != nil {
		return err
	}
	if name == "" {
		name = strings.NewReplacer("-", "_", ".", "_").Replace(guess)
	}
	if !pluginNameRE.MatchString(name) {
		return fmt.Errorf("%q is not a plugin name (letters, digits and _, starting with a letter): choose one with --name", name)
	}
	target := filepath.Join(dest, name)
	if strings.HasSuffix(staged, ".py") {
		target += ".py"
	}
	var backup string
	if _, err := os.Lstat(target); err == nil {
		if !force {
			return fmt.Errorf("a plugin %s is already installed at %s (--force replaces it)", name, target)
		}
		backup = filepath.Join(stage, "previous")
		if err := os.Rename(target, backup); err != nil {
			return fmt.Errorf("replace %s: %w", target, err)
		}
	}
	restore := func() {
		os.RemoveAll(target)
		if backup != "" {
			os.Rename(backup, target)
		}
	}
	if strings.HasSuffix(staged, ".py") { // its requirements first: the plugin is complete once it appears
		if req := strings.TrimSuffix(staged, ".py") + ".requirements.txt"; fileExists(req) {
			if err := os.Rename(req, strings.TrimSuffix(target, ".py")+".requirements.txt"); err != nil {
				restore()
				return fmt.Errorf("install %s: %w", target, err)
			}
		}
	}
	if err := os.Rename(staged, target); err != nil {
		restore()
		return fmt.Errorf("install %s: %w", target, err)
	}
	p, err := pyplugin.Probe(ctx, app.PythonOptions(cfg), target)
	if err != nil {
		restore()
		return fmt.Errorf("plugin not installed: it does not load: %w", err)
	}
	m := p.Meta()
	fmt.Fprintf(out, "installed %s (%s %s) at %s\n", p.Key(), m.Name, m.Version, target)
	for _, mi := range pluginhost.Methods(p) {
		fmt.Fprintf(out, "  %s  %s\n", mi.Type, pysig.Signature(mi))
	}
	fmt.Fprintln(out, "a running nekro serve loads it within a few seconds")
	return nil
}

// stageSource puts the plugin of src into stage and returns its path
// there (a directory, or a .py file) and the name src suggests.
func stageSource(ctx context.Context, src, stage string) (string, string, error) {
	if isGitURL(src) {
		return stageGit(ctx, src, stage)
	}
	fi, err := os.Stat(src)
	if err != nil {
		return "", "", fmt.Errorf("plugin source: %w", err)
	}
	switch {
	case fi.IsDir() && isGitRepo(src):
		return stageGit(ctx, src, stage)
	case fi.IsDir():
		dst := filepath.Join(stage, "plugin")
		if err := copyTree(src, dst); err != nil {
			return "", "", err
		}
		return checkPackage(dst, src, filepath.Base(filepath.Clean(src)))
	case strings.HasSuffix(src, ".zip"):
		dst := filepath.Join(stage, "unzipped")
		if err := unzipPlugin(src, dst); err != nil {
			return "", "", err
		}
		return pluginIn(dst, src, strings.TrimSuffix(filepath.Base(src), ".zip"))
	case strings.HasSuffix(src, ".py") && fi.Mode().IsRegular():
		dst := filepath.Join(stage, "plugin.py")
		if err := copyFile(src, dst, 0o644); err != nil {
			return "", "", err
		}
		if req := strings.TrimSuffix(src, ".py") + ".requirements.txt"; fileExists(req) {
			if err := copyFile(req, filepath.Join(stage, "plugin.requirements.txt"), 0o644); err != nil {
				return "", "", err
			}
		}
		return dst, strings.TrimSuffix(filepath.Base(src), ".py"), nil
	}
	return "", "", fmt.Errorf("plugin source %s: not a directory, a .py file, a .zip or a git repository", src)
}

// pluginIn finds the plugin in an unpacked tree: the tree itself when it
// has __init__.py, or its one top directory.
func pluginIn(dir, src, guess string) (string, string, error) {
	if fileExists(filepath.Join(dir, "__init__.py")) {
		return dir, guess, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", "", err
	}
	if len(ents) == 1 && ents[0].IsDir() {
		return checkPackage(filepath.Join(dir, ents[0].Name()), src, guess)
	}
	return checkPackage(dir, src, guess)
}

// checkPackage refuses a directory that is not a plugin package.
func checkPackage(dir, src, guess string) (string, string, error) {
	if !fileExists(filepath.Join(dir, "__init__.py")) {
		return "", "", fmt.Errorf("plugin source %s: no __init__.py at its top: not a plugin package", src)
	}
	return dir, guess, nil
}

// isGitURL reports whether src names a remote (or file://) repository.
func isGitURL(src string) bool {
	for _, p := range []string{"https://", "http://", "ssh://", "git://", "file://"} {
		if strings.HasPrefix(src, p) {
			return true
		}
	}
	return strings.HasPrefix(src, "git@") && strings.Contains(src, ":")
}

// isGitRepo reports whether dir is a git repository (a work tree or a
// bare one).
func isGitRepo(dir string) bool {
	return fileExists(filepath.Join(dir, ".git")) || dirExists(filepath.Join(dir, ".git")) ||
		(fileExists(filepath.Join(dir, "HEAD")) && dirExists(filepath.Join(dir, "objects")))
}

// stageGit clones src (its default branch, its last commit) with the
// system's git and stages its tree.
func stageGit(ctx context.Context, src, stage string) (string, string, error) {
	if strings.HasPrefix(src, "-") {
		return "", "", fmt.Errorf("plugin source %q: not a repository", src)
	}
	ctx, cancel := context.WithTimeout(ctx, gitCloneTimeout)
	defer cancel()
	clone := filepath.Join(stage, "clone")
	cmd := exec.CommandContext(ctx, "git", "-c", "protocol.ext.allow=never", "clone", "--quiet", "--depth", "1", "--", src, clone)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("git clone %s: %w: %s", src, err, strings.TrimSpace(string(out)))
	}
	dst := filepath.Join(stage, "plugin")
	if err := copyTree(clone, dst); err != nil {
		return "", "", err
	}
	guess := strings.TrimSuffix(filepath.Base(strings.TrimRight(src, "/")), ".git")
	if i := strings.LastIndexAny(guess, ":/"); i >= 0 {
		guess = guess[i+1:]
	}
	return pluginIn(dst, src, guess)
}

// copyTree copies the plugin tree src to dst: directories and regular
// files only (a symbolic link or a device is refused), without .git and
// __pycache__.
func copyTree(src, dst string) error {
	n, size := 0, int64(0)
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "__pycache__") && rel != "." {
			return filepath.SkipDir
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			return fmt.Errorf("plugin source: %s is a symbolic link: refused", rel)
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case !d.Type().IsRegular():
			return fmt.Errorf("plugin source: %s is not a regular file: refused", rel)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n, size = n+1, size+fi.Size()
		if n > maxInstallFiles || size > maxInstallBytes {
			return fmt.Errorf("plugin source: more than %d files or %d MiB", maxInstallFiles, maxInstallBytes>>20)
		}
		return copyFile(p, target, fi.Mode().Perm()&0o755|0o644)
	})
}

func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// unzipPlugin unpacks the zip at src into dst, refusing entries that
// would land outside it (absolute paths, ".."), symbolic links and
// anything but directories and regular files.
func unzipPlugin(src, dst string) error {
	z, err := zip.OpenReader(src)
	if err != nil {
		return fmt.Errorf("plugin source %s: %w", src, err)
	}
	defer z.Close()
	if len(z.File) > maxInstallFiles {
		return fmt.Errorf("plugin source %s: more than %d entries", src, maxInstallFiles)
	}
	var total int64
	for _, f := range z.File {
		name := f.Name
		if strings.Contains(name, "\\") {
			name = strings.ReplaceAll(name, "\\", "/")
		}
		if name == "" || strings.HasPrefix(name, "/") || (len(name) > 1 && name[1] == ':') {
			return fmt.Errorf("plugin source %s: entry %q has an absolute path: refused", src, f.Name)
		}
		for _, part := range strings.Split(name, "/") {
			if part == ".." {
				return fmt.Errorf("plugin source %s: entry %q reaches outside the plugin (..): refused", src, f.Name)
			}
		}
		mode := f.Mode()
		if mode&fs.ModeSymlink != 0 {
			return fmt.Errorf("plugin source %s: entry %q is a symbolic link: refused", src, f.Name)
		}
		target := filepath.Join(dst, filepath.FromSlash(name))
		if rel, err := filepath.Rel(dst, target); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return fmt.Errorf("plugin source %s: entry %q reaches outside the plugin: refused", src, f.Name)
		}
		if mode.IsDir() || strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			continue
		}
		if !mode.IsRegular() {
			return fmt.Errorf("plugin source %s: entry %q is not a regular file: refused", src, f.Name)
		}
		if strings.Contains("/"+name+"/", "/__pycache__/") {
			continue
		}
		total += int64(f.UncompressedSize64)
		if f.UncompressedSize64 > maxInstallBytes || total > maxInstallBytes {
			return fmt.Errorf("plugin source %s: unpacks to more than %d MiB", src, maxInstallBytes>>20)
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if err := unzipFile(f, target); err != nil {
			return fmt.Errorf("plugin source %s: %s: %w", src, f.Name, err)
		}
	}
	return nil
}

func unzipFile(f *zip.File, target string) error {
	r, err := f.Open()
	if err != nil {
		return err
	}
	defer r.Close()
	out, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	// The header's size is checked; the data is bounded by it too.
	if _, err := io.Copy(out, io.LimitReader(r, int64(f.UncompressedSize64)+1)); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
