package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/keys"
	"github.com/nekro-go/nekro/internal/pyplugin"
)

func newPluginsRemoveCmd(g *globals) *cobra.Command {
	var purge, keep bool
	cmd := &cobra.Command{
		Use:   "remove KEY|NAME",
		Short: "Remove a Python plugin from the plugin directories (--purge also erases its data)",
		Long: `Remove a Python plugin: its file or package directory in the plugin
directories (the --plugin-dir directories and data/plugins-py/) and its own
package environment (data/python/envs/). KEY is the plugin's key
(author.module, as nekro plugins lists it); NAME, its directory or file
name, also reaches a plugin that does not load. A running nekro serve
unloads it within a few seconds: calls in flight finish first.

What the plugin kept is decided by a flag: --keep-data (the default) leaves
its KV values and its data directory (data/plugins/KEY/, its settings
included), so installing it again finds them; --purge erases both.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if purge && keep {
				return fmt.Errorf("--purge and --keep-data exclude each other")
			}
			return removePlugin(cmd.Context(), cmd.OutOrStdout(), g.config(), args[0], purge)
		},
	}
	cmd.Flags().BoolVar(&purge, "purge", false, "also erase the plugin's KV values and its data directory (data/plugins/KEY/)")
	cmd.Flags().BoolVar(&keep, "keep-data", false, "keep the plugin's KV values and data directory (the default)")
	return cmd
}

// removePlugin finds the plugin named by arg, deletes its files and
// environment and, with purge, its data.
func removePlugin(ctx context.Context, out io.Writer, cfg app.Config, arg string, purge bool) error {
	opts := app.PythonOptions(cfg)
	dirs := append(append([]string(nil), opts.Dirs...), opts.InstalledDir)
	path, key := "", ""
	// A name: the file or directory itself, loaded or not.
	if pluginNameRE.MatchString(arg) {
		for _, d := range dirs {
			for _, cand := range []string{filepath.Join(d, arg), filepath.Join(d, arg+".py")} {
				if _, err := os.Lstat(cand); err == nil {
					path = cand
					break
				}
			}
			if path != "" {
				break
			}
		}
	}
	// A key, or the key of the plugin at path: the plugins say theirs.
	set, err := pyplugin.Load(ctx, opts)
	if set != nil {
		defer set.Close()
	}
	if err != nil {
		return err
	}
	if path == "" {
		p, ok := set.PathOf(arg)
		if !ok {
			return fmt.Errorf("no Python plugin %s in %s (nekro plugins lists them)", arg, strings.Join(dirs, ", "))
		}
		path, key = p, arg
	} else {
		abs, _ := filepath.Abs(path)
		for _, p := range set.Plugins {
			if set.Paths[p.Key()] == abs {
				key = p.Key()
			}
		}
	}
	set.Close() // its processes run in the directory about to go
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(abs); err != nil {
		return fmt.Errorf("remove %s: %w", abs, err)
	}
	if strings.HasSuffix(abs, ".py") {
		os.Remove(strings.TrimSuffix(abs, ".py") + ".requirements.txt")
	}
	if err := pyplugin.RemoveEnv(opts.CacheDir, abs); err != nil {
		return fmt.Errorf("remove the plugin's environment: %w", err)
	}
	what := key
	if what == "" {
		what = filepath.Base(abs)
	}
	fmt.Fprintf(out, "removed %s (%s)\n", what, abs)
	if !purge {
		if key != "" {
			fmt.Fprintf(out, "its KV values and data directory are kept (--purge erases them)\n")
		}
		return nil
	}
	if key == "" {
		return fmt.Errorf("the plugin did not load, so its key is unknown: its data was not purged (nekro kv --plugin KEY and data/plugins/KEY hold it)")
	}
	return purgePluginData(ctx, out, cfg, key)
}

// purgePluginData erases the plugin's KV values and its data directory
// (a volume's files and image, when it is one).
func purgePluginData(ctx context.Context, out io.Writer, cfg app.Config, key string) error {
	if err := keys.Plugin(key); err != nil {
		return err
	}
	a, err := app.OpenStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Close(ctx)
	n, err := a.Store.DeletePlugin(ctx, key)
	if err != nil {
		return err
	}
	dir := a.Layout.PluginDir(key)
	// The directory may be a mounted volume (a running nekro holds it):
	// its files go; the directory and the image go when nothing holds it.
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("purge %s: %w", dir, err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("purge %s: %w", dir, err)
		}
	}
	if err := os.Remove(dir); err == nil || errors.Is(err, fs.ErrNotExist) {
		if img, ok := a.Layout.VolumeImage(dir); ok {
			os.Remove(img)
		}
	}
	fmt.Fprintf(out, "purged %s: %d KV value(s) and its data directory %s\n", key, n, dir)
	return nil
}
