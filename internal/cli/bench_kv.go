package cli

import (
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/kv/kvbench"
)

func init() { benchCommands = append(benchCommands, newBenchKVCmd) }

func newBenchKVCmd(g *globals) *cobra.Command {
	o := kvbench.Options{}
	cmd := &cobra.Command{
		Use:   "kv",
		Short: "KV get/set on SQLite and PostgreSQL vs an in-memory map, and get cost at 10k vs 1M keys",
		Long: `Measure the KV store through the same front plugins use: get and set
p50/p99 and ops/s with 100-byte and 64 KiB values, on SQLite, on PostgreSQL
(when --postgres or NEKRO_TEST_DATABASE_URL names one; each case in a fresh
schema, dropped afterwards) and on an in-memory map (the ceiling), then get
p50 at --scale-small vs --scale-large keys. The 64 KiB case writes
--large-keys x 64 KiB per engine (6.5 GB at 100,000 keys).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := os.MkdirTemp("", "nekro-kvbench-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			o.Dir = dir
			return kvbench.Run(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.PostgresURL, "postgres", os.Getenv("NEKRO_TEST_DATABASE_URL"), "PostgreSQL URL to include (env NEKRO_TEST_DATABASE_URL); empty skips it")
	f.IntVar(&o.Keys, "keys", 100_000, "keys with 100-byte values")
	f.IntVar(&o.LargeKeys, "large-keys", 100_000, "keys with 64 KiB values (0 skips the case)")
	f.IntVar(&o.Ops, "ops", 20_000, "gets, then sets, per case at most")
	f.DurationVar(&o.Budget, "budget", 3*time.Second, "time per op and case at most")
	f.IntVar(&o.ScaleSmall, "scale-small", 10_000, "store size of the small side of the growth check")
	f.IntVar(&o.ScaleLarge, "scale-large", 1_000_000, "store size of the large side of the growth check (0 skips it)")
	return cmd
}
