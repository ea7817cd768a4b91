package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/bench"
)

func init() { subcommands = append(subcommands, newBenchCmd) }

// benchCommands are added by other files: one `nekro bench <name>` each.
var benchCommands []func(g *globals) *cobra.Command

func newBenchCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure nekro against baselines taken in the same run",
	}
	var opt bench.SpineOptions
	spine := &cobra.Command{
		Use:   "spine",
		Short: "Sandbox start-up vs bare python3, and TOOL call round trips vs a per-call TCP connection",
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := os.MkdirTemp("", "nekro-bench-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			os.Chmod(dir, 0o711)
			opt.Template = g.sandboxTemplate
			return bench.Spine(cmd.Context(), cmd.OutOrStdout(), dir+"/data", g.python, opt)
		},
	}
	spine.Flags().IntVar(&opt.Runs, "runs", 30, "start-up runs of each kind")
	spine.Flags().IntVar(&opt.Calls, "calls", 10000, "TOOL calls of each kind")
	spine.Flags().IntVar(&opt.Zygotes, "zygotes", 8, "nekro serve's --zygotes for the active-chat rows (0 measures without zygotes)")
	cmd.AddCommand(spine)
	for _, sub := range benchCommands {
		cmd.AddCommand(sub(g))
	}
	return cmd
}
