package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/server/serverbench"
)

func init() { benchCommands = append(benchCommands, newBenchTurnCmd) }

func newBenchTurnCmd(g *globals) *cobra.Command {
	var opt serverbench.Options
	cmd := &cobra.Command{
		Use:   "turn",
		Short: "Chat turns through the HTTP API vs a bare sandboxed run; many chats at once",
		Long: `Measure a chat turn through nekro serve's API with an instant scripted model
(one run with three TOOL calls) against a bare sandboxed run of the same
code, then many chats talking at once: turns/s, the server's peak memory,
and a check that no message was lost or answered twice.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := os.MkdirTemp("", "nekro-bench-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			os.Chmod(dir, 0o711)
			opt.DataDir, opt.Python = dir, g.python
			_, err = serverbench.Run(cmd.Context(), cmd.OutOrStdout(), opt)
			return err
		},
	}
	cmd.Flags().IntVar(&opt.Turns, "turns", 50, "sequential turns for the latency figures")
	cmd.Flags().IntVar(&opt.Chats, "chats", 100, "chats talking at once")
	cmd.Flags().IntVar(&opt.PerChat, "per-chat", 5, "turns per chat")
	cmd.Flags().BoolVar(&opt.NoSpares, "no-spares", false, "run the server without warm sandboxes")
	return cmd
}
