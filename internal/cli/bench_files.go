package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/files/filesbench"
)

func init() { benchCommands = append(benchCommands, newBenchFilesCmd) }

func newBenchFilesCmd(g *globals) *cobra.Command {
	var o filesbench.Options
	var mib int64
	cmd := &cobra.Command{
		Use:   "files",
		Short: "MixedForwardFile of a large host file vs cp of the same file, and its memory",
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := os.MkdirTemp("", "nekro-filesbench-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			o.Dir, o.Size = dir, mib<<20
			return filesbench.Run(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().Int64Var(&mib, "size", 256, "file size in MiB")
	cmd.Flags().IntVar(&o.Rounds, "rounds", 5, "forwards and cps each")
	return cmd
}
