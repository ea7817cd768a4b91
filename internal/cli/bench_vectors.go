package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/vector/vectorbench"
)

func init() { benchCommands = append(benchCommands, newBenchVectorsCmd) }

func newBenchVectorsCmd(g *globals) *cobra.Command {
	o := vectorbench.Options{}
	cmd := &cobra.Command{
		Use:   "vectors",
		Short: "Vector search latency at 10k and 100k chunks vs a plain Go loop over the same vectors",
		Long: `Measure the vector store under the knowledge base and memory: store
--chunks vectors of --dim dimensions in one scope of a scratch SQLite
database, load them into a second handle (the first search, as after a
restart), then time --searches top-k searches, each alternated with a
plain Go loop of dot products over the same vectors (the baseline, same
run). The search itself is in memory and the same on PostgreSQL; only
the load reads the database.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := os.MkdirTemp("", "nekro-vectorbench-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			o.Dir = dir
			return vectorbench.Run(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&o.Chunks, "chunks", []int{10_000, 100_000}, "scope sizes to measure")
	f.IntVar(&o.Dim, "dim", 768, "dimensions per vector")
	f.IntVar(&o.Clusters, "clusters", 0, "0: uniform random vectors; N: vectors near N centres, queries near stored vectors")
	f.IntVar(&o.Searches, "searches", 30, "searches per size")
	f.IntVar(&o.TopK, "top-k", 10, "hits per search")
	return cmd
}
