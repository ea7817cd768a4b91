package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/plugin"
)

func init() { subcommands = append(subcommands, newKVCmd) }

// kvFlags are the flags of every kv subcommand.
type kvFlags struct {
	plugin     string
	chat, user string
}

func (f *kvFlags) scope() plugin.Scope { return pluginhost.ScopeOf(f.chat, f.user) }

// open opens the store the server uses (the same data directory and
// database) and the plugin's namespace in it.
func (f *kvFlags) open(cmd *cobra.Command, g *globals) (*app.App, plugin.Store, error) {
	if f.plugin == "" {
		return nil, nil, fmt.Errorf("--plugin is required (a plugin key, author.module; see nekro plugins)")
	}
	a, err := f.openStore(cmd, g)
	if err != nil {
		return nil, nil, err
	}
	if err := f.known(cmd, g, a); err != nil {
		a.Close(cmd.Context())
		return nil, nil, err
	}
	return a, a.Store.For(f.plugin), nil
}

// known refuses a --plugin that names no plugin: one not compiled in, not
// defined by a --plugin-dir Python plugin, and keeping no values (a
// misspelt key would otherwise read as empty and write where no plugin
// looks). A plugin no longer compiled in is still reached through the
// values it left.
func (f *kvFlags) known(cmd *cobra.Command, g *globals, a *app.App) error {
	var keys []string
	for _, p := range pluginhost.Registered() {
		if p.Key() == f.plugin {
			return nil
		}
		keys = append(keys, p.Key())
	}
	if u, err := a.Store.Usage(cmd.Context(), f.plugin); err != nil {
		return err
	} else if u.Keys > 0 {
		return nil
	}
	if len(g.pluginDirs) > 0 {
		plugins, py, err := app.Plugins(cmd.Context(), g.config())
		if py != nil {
			defer py.Close()
		}
		if err != nil {
			return err
		}
		for _, p := range plugins {
			if p.Key() == f.plugin {
				return nil
			}
			keys = append(keys, p.Key())
		}
	}
	sort.Strings(keys)
	keys = slices.Compact(keys)
	return fmt.Errorf("--plugin %s: no such plugin (not compiled in, no --plugin-dir defines it, no values stored under it); known plugins: %s",
		f.plugin, strings.Join(keys, ", "))
}

// openStore opens the store with the operator's limits (--kv-max-value,
// --kv-quota), as the server does; closing the App closes it.
func (f *kvFlags) openStore(cmd *cobra.Command, g *globals) (*app.App, error) {
	return f.openWith(cmd, g, app.OpenStore)
}

// openWith checks the database is there, then opens it with open.
func (f *kvFlags) openWith(cmd *cobra.Command, g *globals, open func(context.Context, app.Config) (*app.App, error)) (*app.App, error) {
	cfg := g.config()
	if cfg.DatabaseURL == "" {
		layout, err := files.NewLayout(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(layout.Database()); err != nil {
			return nil, fmt.Errorf("no database at %s (wrong --data?)", layout.Database())
		}
	}
	return open(cmd.Context(), cfg)
}

func newKVCmd(g *globals) *cobra.Command {
	f := &kvFlags{}
	cmd := &cobra.Command{
		Use:   "kv",
		Short: "Read and change plugins' KV stores",
		Long: `Read and change a plugin's KV store, as the plugin sees it.

A value lives in one scope: the plugin's own (no --chat, no --user), a
chat's (--chat), a user's across chats (--user), or a user's in one chat
(--chat and --user). The store is the server's: the --data directory's
nekro.db, or the PostgreSQL database of --database / NEKRO_DATABASE_URL.

--plugin must name a plugin compiled in, one that keeps values in the
store (also one no longer compiled in), or a Python plugin of --plugin-dir;
any other key is refused with the list of known ones.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.plugin, "plugin", "", "plugin key, author.module (required)")
	pf.StringVar(&f.chat, "chat", "", "chat key of the scope")
	pf.StringVar(&f.user, "user", "", "user key of the scope")

	cmd.AddCommand(&cobra.Command{
		Use:   "get KEY",
		Short: "Print a value (exit status 1 if there is none)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, ns, err := f.open(cmd, g)
			if err != nil {
				return err
			}
			defer st.Close(cmd.Context())
			v, ok, err := ns.Get(cmd.Context(), f.scope(), args[0])
			if err != nil {
				return err
			}
			if !ok {
				fmt.Fprintf(cmd.ErrOrStderr(), "nekro: no value for %q in %s of plugin %s\n", args[0], f.scope(), f.plugin)
				return &ExitError{Code: 1}
			}
			_, err = io.WriteString(cmd.OutOrStdout(), v+"\n")
			return err
		},
	})

	var ttl time.Duration
	set := &cobra.Command{
		Use:   "set KEY VALUE|-",
		Short: "Store a value (- reads it from standard input); prints created or updated",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			value := args[1]
			if value == "-" {
				b, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return fmt.Errorf("read value: %w", err)
				}
				value = string(b)
			}
			var opts []plugin.SetOption
			if ttl != 0 {
				opts = append(opts, plugin.WithTTL(ttl))
			}
			st, ns, err := f.open(cmd, g)
			if err != nil {
				return err
			}
			defer st.Close(cmd.Context())
			r, err := ns.Set(cmd.Context(), f.scope(), args[0], value, opts...)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), r)
			return nil
		},
	}
	set.Flags().DurationVar(&ttl, "ttl", 0, "expire the value after this long (e.g. 1h)")
	cmd.AddCommand(set)

	cmd.AddCommand(&cobra.Command{
		Use:     "del KEY",
		Aliases: []string{"delete", "rm"},
		Short:   "Delete a value; prints deleted or not found",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, ns, err := f.open(cmd, g)
			if err != nil {
				return err
			}
			defer st.Close(cmd.Context())
			r, err := ns.Delete(cmd.Context(), f.scope(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), r)
			return nil
		},
	})

	var prefix string
	list := &cobra.Command{
		Use:   "list",
		Short: "Print the keys of one scope, one a line, in byte order",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, ns, err := f.open(cmd, g)
			if err != nil {
				return err
			}
			defer st.Close(cmd.Context())
			q := plugin.KeysQuery{Prefix: prefix, Limit: 1000}
			var b strings.Builder
			for {
				page, err := ns.Keys(cmd.Context(), f.scope(), q)
				if err != nil {
					return err
				}
				for _, k := range page.Keys {
					b.WriteString(k + "\n")
				}
				if page.Next == "" {
					break
				}
				q.Cursor = page.Next
			}
			_, err = io.WriteString(cmd.OutOrStdout(), b.String())
			return err
		},
	}
	list.Flags().StringVar(&prefix, "prefix", "", "only keys starting with this")
	cmd.AddCommand(list)

	cmd.AddCommand(&cobra.Command{
		Use:   "erase-user USER",
		Short: "Delete a user's values in every plugin (their own and their chat+user scopes) and their memories",
		Long: `Delete everything plugins keep for a user: the user's own scope and the
user's scope in every chat, in every plugin's namespace, also plugins no
longer compiled in. Chat-scoped and plugin-wide values stay. It prints how
many values it deleted per plugin.

It also erases the long-term memories about the user, in every chat, with
their vectors, and prints how many ("memories", last).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := f.openWith(cmd, g, app.OpenMemories)
			if err != nil {
				return err
			}
			defer st.Close(cmd.Context())
			forgotten, merr := st.Memories.EraseUser(cmd.Context(), args[0])
			erased, err := st.Store.EraseUser(cmd.Context(), args[0])
			err = errors.Join(err, merr)
			keys := make([]string, 0, len(erased))
			for k := range erased {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%d\n", k, erased[k])
			}
			if forgotten > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "memories\t%d\n", forgotten)
			}
			if err != nil {
				return err
			}
			if len(erased) == 0 && forgotten == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "no values of user %s\n", args[0])
			}
			return nil
		},
	})

	cmd.AddCommand(&cobra.Command{
		Use:   "usage",
		Short: "Print the bytes and keys the plugin's values take up",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, _, err := f.open(cmd, g)
			if err != nil {
				return err
			}
			defer st.Close(cmd.Context())
			u, err := st.Store.Usage(cmd.Context(), f.plugin)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d bytes in %d keys\n", u.Bytes, u.Keys)
			return nil
		},
	})
	return cmd
}
