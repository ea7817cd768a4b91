package cli

import (
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/bench"
)

func init() { benchCommands = append(benchCommands, newBenchLoadCmd) }

func newBenchLoadCmd(g *globals) *cobra.Command {
	var (
		opt     bench.LoadOptions
		zygotes int
	)
	cmd := &cobra.Command{
		Use:   "load",
		Short: "Many chats through nekro serve's API: turns/s, latency, CPU per turn, memory and processes of the whole tree",
		Long: `Start nekro serve's assembly with serve's defaults and an instant scripted
model whose every reply is one send_msg_text, then drive --chats chats
through the HTTP API and the events stream like clients: each posts a
message, waits for its answer and its turn's end, and posts the next, up
to --messages. It prints turns/s, post-to-answer p50/p99 (a chat's first
message apart from the others, and split into the POST, the wait until a
turn claims the message, and the turn), CPU per turn of nekro and every process
below it, peak PSS of that tree, and process counts, against a bare
'python3 -c pass' timed before, during and after the load, and checks
that no message was lost or answered twice.

The bench's own client and scripted model run in nekro's process: their
CPU is in the figures (a --cpuprofile shows how much).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := os.MkdirTemp("", "nekro-bench-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			os.Chmod(dir, 0o711)
			// What nekro serve runs with by default (serve.go), in a
			// scratch data directory, without the operator's plugin
			// directories, MCP servers, database or models.
			ac := g.config()
			ac.DataDir, ac.DatabaseURL = filepath.Join(dir, "data"), ""
			ac.PluginDirs, ac.MCPConfig, ac.Enable = nil, "", nil
			ac.Runtime.WarmSpares = true
			ac.Runtime.SharedIdle = 30 * time.Minute
			ac.Runtime.SpareIdle = opt.Idle
			ac.Sandbox.Zygotes = zygotes
			_, err = bench.Load(cmd.Context(), cmd.OutOrStdout(), ac, opt)
			return err
		},
	}
	g.addSandboxFlags(cmd)
	cmd.Flags().IntVar(&opt.Chats, "chats", 10, "chats")
	cmd.Flags().IntVar(&opt.Messages, "messages", 2, "messages each chat posts, one after the other's answer")
	cmd.Flags().IntVar(&opt.Concurrency, "concurrency", 0, "chats in flight at once (0: all)")
	cmd.Flags().BoolVar(&opt.Again, "again", true, "drive the same chats a second time: warm chats against new ones")
	cmd.Flags().DurationVar(&opt.Idle, "idle", 0, "the runtime's idle time of spares, zygotes and chats' volumes; when set, wait it out and count what stays (0: serve's default, no wait)")
	cmd.Flags().IntVar(&zygotes, "zygotes", 8, "as nekro serve's --zygotes")
	cmd.Flags().StringVar(&opt.CPUProfile, "cpuprofile", "", "write a pprof CPU profile of nekro's process during the first pass to this file (the second's to FILE.again)")
	cmd.Flags().StringVar(&opt.MemProfile, "memprofile", "", "write a pprof heap profile of nekro's process to this file once the load is over (after --idle), and report its memory before and after the Go runtime returns what it holds unused")
	return cmd
}
