package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/chat"
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
		Short: "Reset a chat: clear its history, then run every plugin's on-channel-reset hook",
		Long: `Reset a chat as POST /api/chats/{chat}/reset does: delete its message
history, then run every enabled plugin's on-channel-reset hook with the
chat's key. Plugins' KV data stays unless a hook removes it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			rt, err := runtime.Open(ctx, g.config())
			if err != nil {
				return err
			}
			defer rt.Close(ctx)
			chats, err := chat.Open(ctx, rt.Database(), rt.Layout(), g.logger())
			if err != nil {
				return err
			}
			defer chats.Close()
			n, err := chats.Reset(ctx, args[0])
			if err != nil {
				return err
			}
			if err := rt.ResetChat(ctx, args[0]); err != nil {
				return fmt.Errorf("chat %s: history cleared, but: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "chat %s reset: %d messages deleted, reset hooks ran\n", args[0], n)
			return nil
		},
	})
	return cmd
}
