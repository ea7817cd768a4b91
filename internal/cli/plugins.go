package cli

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/pyplugin"
	"github.com/nekro-go/nekro/internal/pysig"
	"github.com/nekro-go/nekro/internal/registry"
)

func init() { subcommands = append(subcommands, newPluginsCmd) }

func newPluginsCmd(g *globals) *cobra.Command {
	var prompt bool
	cmd := &cobra.Command{
		Use:   "plugins",
		Short: "List the enabled plugins (see --plugins) and their sandbox methods",
		RunE: func(cmd *cobra.Command, args []string) error {
			// Python plugins describe themselves once their process runs;
			// nothing else is opened (no database, no hook runs).
			plugins, py, err := app.Plugins(cmd.Context(), g.config())
			if py != nil {
				defer py.Close()
			}
			if err != nil {
				return err
			}
			reg, err := registry.New(plugins, g.logger(), registry.Installed(py.Keys()...))
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if prompt {
				fmt.Fprint(out, reg.RenderMethods())
				return nil
			}
			tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			for _, p := range reg.Plugins() {
				m := p.Meta()
				fmt.Fprintf(tw, "%s\t%s %s\t%s\n", p.Key(), m.Name, m.Version, m.Description)
				for _, mi := range pluginhost.Methods(p) {
					fmt.Fprintf(tw, "  %s\t%s\t%s\n", mi.Type, pysig.Signature(mi), mi.Description)
				}
				for _, c := range pluginhost.Commands(p) {
					if !c.Hidden {
						fmt.Fprintf(tw, "  COMMAND\t%s\t%s\n", c.Usage, c.Description)
					}
				}
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			listReplaced(out, reg)
			return listFailed(out, py)
		},
	}
	cmd.Flags().BoolVar(&prompt, "prompt", false, "print the method docs exactly as the AI reads them")
	cmd.AddCommand(newPluginsConfigCmd(g), newPluginsStateCmd(g, true), newPluginsStateCmd(g, false),
		newPluginsInstallCmd(g), newPluginsRemoveCmd(g))
	return cmd
}

// listReplaced lists the built-in plugins an installed plugin replaces
// (registry.Installed): "nekro.dice: off, replaced by KEY (same method
// dice_roll)". They are off by rule, not by failure: the exit status
// stays 0.
func listReplaced(out io.Writer, reg *registry.Registry) {
	replaced := reg.Replaced()
	if len(replaced) == 0 {
		return
	}
	keys := make([]string, 0, len(replaced))
	for k := range replaced {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(out, "\nreplaced (%d):\n", len(keys))
	for _, k := range keys {
		fmt.Fprintf(out, "  %s: off, %s\n", k, replaced[k])
	}
}

// listFailed lists the Python plugins that did not load, each with its
// error (file, line, exception), as the reference's failed-plugin
// registry shows them; any makes `nekro plugins` fail (exit 1) once the
// others are listed.
func listFailed(out io.Writer, py *pyplugin.Set) error {
	if py == nil {
		return nil
	}
	failed := py.Failures()
	if len(failed) == 0 {
		return nil
	}
	files := make([]string, 0, len(failed))
	for f := range failed {
		files = append(files, f)
	}
	sort.Strings(files)
	fmt.Fprintf(out, "\nnot loaded (%d):\n", len(files))
	for _, f := range files {
		fmt.Fprintf(out, "  %v\n", failed[f])
	}
	return fmt.Errorf("%d python plugin(s) did not load (listed above)", len(files))
}
