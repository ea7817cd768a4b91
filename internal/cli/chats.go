package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

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
	var user string
	var asJSON bool
	prompt := &cobra.Command{
		Use:   "prompt CHAT",
		Short: "Print the request a turn in CHAT would send the model now",
		Long: `Print the messages a turn in CHAT would send the model now: the system
prompt (runtime contract and the methods this chat's code may call, after
the plugins' method filters), then the plugins' injected context and the
chat's history, with its unanswered user messages as those to answer.
--user names the user the turn would run for (it changes what user-scoped
plugins inject). Nothing is sent and nothing is stored.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			a, err := app.Open(ctx, g.config())
			if err != nil {
				return err
			}
			defer a.Close(ctx)
			msgs, err := a.Agent.Prompt(ctx, args[0], user)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"messages": msgs})
			}
			for _, m := range msgs {
				fmt.Fprintf(out, "===== %s =====\n%s\n", m.Role, m.Content.String())
			}
			return nil
		},
	}
	prompt.Flags().StringVar(&user, "user", "", "the user the turn would run for")
	prompt.Flags().BoolVar(&asJSON, "json", false, `print {"messages": [...]} as the model API receives them`)
	cmd.AddCommand(prompt)
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List the chats, most recently active first, with their last message and turn state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			a, err := app.Open(ctx, g.config())
			if err != nil {
				return err
			}
			defer a.Close(ctx)
			chats, err := a.Chats.Chats(ctx, limit, 0)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "CHAT\tLAST ACTIVITY\tTURN\tLAST MESSAGE")
			for _, c := range chats {
				text := strings.ReplaceAll(c.LastMessage.Text, "\n", " ")
				if r := []rune(text); len(r) > 60 {
					text = string(r[:60]) + "..."
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s: %s\n", c.ChatKey, c.LastActivity.Local().Format("2006-01-02 15:04:05"),
					cmp.Or(c.TurnState, "-"), c.LastMessage.SenderName, text)
			}
			return tw.Flush()
		},
	}
	list.Flags().IntVar(&limit, "limit", 50, "chats to list at most")
	cmd.AddCommand(list)
	cmd.AddCommand(newChatMembersCmd(g)) // users.go
	return cmd
}
