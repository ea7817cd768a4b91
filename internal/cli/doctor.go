package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/sandbox"
)

func init() { subcommands = append(subcommands, newDoctorCmd) }

func newDoctorCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check that this machine can run nekro: sandbox, interpreter, data directory",
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			ctx := cmd.Context()
			a, err := app.Open(ctx, g.config())
			if err != nil {
				return fmt.Errorf("data directory and plugins: %w", err)
			}
			defer a.Close(ctx)
			rt := a.Runtime
			fmt.Fprintf(out, "ok   data directory %s\n", rt.Layout().Root)
			if err := rt.Runner().Check(ctx); err != nil {
				return fmt.Errorf("sandbox: %w", err)
			}
			fmt.Fprintln(out, "ok   sandbox backend starts")
			fmt.Fprintln(out, "ok   inherited descriptors: everything above stderr is closed on exec at start, sandboxes get only their own")
			for _, p := range rt.Protections() {
				state := "ok  "
				if !p.Active {
					state = "warn"
				}
				fmt.Fprintf(out, "%s %s: %s\n", state, p.Name, p.Detail)
			}
			if q := g.kvQuotaBytes(); q < 0 {
				fmt.Fprintln(out, "warn KV quota: none (--kv-quota none): a plugin can grow the database without bound")
			} else {
				fmt.Fprintf(out, "ok   KV quota: %s per plugin (--kv-quota)\n", (*byteSize)(&q))
			}
			res, err := rt.Exec(ctx, runtime.ExecRequest{ChatKey: "__doctor__", Limits: sandbox.Limits{Timeout: 20 * time.Second},
				Code: `import socket
try:
    socket.create_connection(("1.1.1.1", 53), timeout=1)
    print("network: reachable")
except OSError:
    print("network: none")
print("python ok")`})
			if err != nil {
				return fmt.Errorf("sandboxed run: %w", err)
			}
			if res.StopType != sandbox.Normal || !strings.Contains(res.Output, "python ok") {
				return fmt.Errorf("sandboxed run ended %s:\n%s", res.StopType, res.Output)
			}
			fmt.Fprintf(out, "ok   sandboxed python runs (%d ms); %s", res.DurationMS, strings.SplitN(res.Output, "\n", 2)[0]+"\n")
			for key, reason := range rt.Registry().Disabled() {
				fmt.Fprintf(out, "warn plugin %s disabled: %s\n", key, reason)
			}
			fmt.Fprintf(out, "ok   %d plugins enabled, %d sandbox methods\n", len(rt.Registry().Plugins()), len(rt.Registry().Methods()))
			return doctorPlatforms(ctx, out) // platforms.go
		},
	}
}
