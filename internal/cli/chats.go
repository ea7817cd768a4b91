package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/runtime"
)

func init() { subcommands = append(subcommands, newChatsCmd) }

func newChatsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "chats",
		Short: "Manage chats",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "reset CHAT",
		Short: "Reset a chat: run every plugin's on-channel-reset hook for it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			rt, err := runtime.Open(ctx, g.config())
			if err != nil {
				return err
			}
			defer rt.Close(ctx)
			if err := rt.ResetChat(ctx, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "chat %s reset\n", args[0])
			return nil
		},
	})
	return cmd
}
