package cli

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/host"
	"github.com/nekro-go/nekro/internal/pluginstate"
	"github.com/nekro-go/nekro/plugin"
)

func newPluginsConfigCmd(g *globals) *cobra.Command {
	var sets []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "config KEY",
		Short: "Show a plugin's settings (secrets masked), or change them with --set",
		Long: `Show a plugin's settings, kept in data/plugins/KEY/config.yaml, with secrets
masked; --set FIELD=VALUE (repeatable) changes them, all checked before any
is kept: an unknown field or a value that does not fit is refused, naming
the field, with a non-zero exit. A running nekro serve picks a change up
within a second; so it does an edit of config.yaml by hand.

Values are read as the field's kind: true/false (also yes/no, 1/0, on/off),
numbers, text as it is, lists and mappings as JSON.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := g.config()
			plugins, py, err := app.Plugins(cmd.Context(), cfg)
			if py != nil {
				defer py.Close()
			}
			if err != nil {
				return err
			}
			p, err := findPlugin(plugins, args[0])
			if err != nil {
				return err
			}
			rc := cfg.Runtime
			rc.DataDir, rc.Log = cfg.DataDir, cfg.Log
			f, release, err := host.OpenPluginConfig(cmd.Context(), rc, p)
			if err != nil {
				return err
			}
			defer release()
			schema := f.Schema()
			if len(sets) > 0 {
				if err := f.Err(); err != nil {
					return fmt.Errorf("%w; fix the file before changing settings with --set", err)
				}
				changes := map[string]any{}
				for _, s := range sets {
					name, text, ok := strings.Cut(s, "=")
					if !ok {
						return fmt.Errorf("--set %q: want FIELD=VALUE", s)
					}
					fd, ok := schema.Field(name)
					if !ok {
						_, err := schema.Check(map[string]any{name: nil})
						return err
					}
					v, err := fd.Parse(text)
					if err != nil {
						return err
					}
					changes[name] = v
				}
				if _, err := f.Set(changes); err != nil {
					return err
				}
			}
			values, _ := f.Values()
			shown := schema.Mask(values)
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"plugin": p.Key(), "file": f.Path(), "values": shown, "schema": schema.JSONSchema()})
			}
			if err := f.Err(); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "nekro: %v\nnekro: the values below are those in force until the file is fixed\n", err)
			}
			fmt.Fprintf(out, "# %s (%s)\n", p.Key(), f.Path())
			tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			for _, fd := range schema.Fields {
				v, _ := json.Marshal(shown[fd.Name])
				about := fd.Title
				if fd.Description != "" {
					about = strings.TrimPrefix(about+": "+fd.Description, ": ")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", fd.Name, v, about)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringArrayVar(&sets, "set", nil, "FIELD=VALUE to change (repeatable)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the values and their JSON Schema as JSON")
	return cmd
}

// findPlugin returns the plugin with key, or an error listing the keys.
func findPlugin(plugins []*plugin.Plugin, key string) (*plugin.Plugin, error) {
	var keys []string
	for _, p := range plugins {
		if p.Key() == key {
			return p, nil
		}
		keys = append(keys, p.Key())
	}
	sort.Strings(keys)
	return nil, fmt.Errorf("no plugin %s (plugins: %s)", key, strings.Join(keys, ", "))
}

func newPluginsStateCmd(g *globals, on bool) *cobra.Command {
	use, short := "disable KEY", "Turn a plugin off: its methods leave the prompt, the stubs and every call; kept across restarts"
	if on {
		use, short = "enable KEY", "Turn a plugin the operator disabled back on"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + `.
The choice is kept in the database: a running nekro serve (and every nekro
sharing the database) follows within a second. --plugins stays the
start-time allowlist: a plugin it leaves out is not loaded at all.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := g.config()
			plugins, py, err := app.Plugins(cmd.Context(), cfg)
			if py != nil {
				defer py.Close()
			}
			if err != nil {
				return err
			}
			p, err := findPlugin(plugins, args[0])
			if err != nil {
				return err
			}
			a, err := app.OpenStore(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer a.Close(cmd.Context())
			states, err := pluginstate.Open(cmd.Context(), a.DB)
			if err != nil {
				return err
			}
			defer states.Close()
			if err := states.Set(cmd.Context(), p.Key(), on); err != nil {
				return err
			}
			state := "disabled"
			if on {
				state = "enabled"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "plugin %s %s\n", p.Key(), state)
			return nil
		},
	}
}
