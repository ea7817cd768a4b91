package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/pluginhost"
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
				for file, err := range py.Failed {
					fmt.Fprintf(cmd.ErrOrStderr(), "nekro: python plugin %s not loaded: %v\n", file, err)
				}
			}
			if err != nil {
				return err
			}
			reg, err := registry.New(plugins, g.logger())
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
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&prompt, "prompt", false, "print the method docs exactly as the AI reads them")
	cmd.AddCommand(newPluginsConfigCmd(g), newPluginsStateCmd(g, true), newPluginsStateCmd(g, false))
	return cmd
}
