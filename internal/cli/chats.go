package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/app"
)

func init() { subcommands = append(subcommands, newChatsCmd) }

func newChatsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "chats",
		Short: "Manage chats",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "reset CHAT",
		Short: "Reset a chat: clear its history, discard its warm sandboxes, run every plugin's on-channel-reset hook",
		Long: `Reset a chat as POST /api/chats/{chat}/reset does: delete its message
history, then run every enabled plugin's on-channel-reset hook with the
chat's key. Plugins' KV data stays unless a hook removes it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			a, err := app.Open(ctx, g.config())
			if err != nil {
				return err
			}
			defer a.Close(ctx)
			n, err := a.Agent.ResetCount(ctx, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "chat %s reset: %d messages deleted, reset hooks ran\n", args[0], n)
			return nil
		},
	})
	return cmd
}
