package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/mcp"
)

func init() { subcommands = append(subcommands, newMCPCmd) }

func newMCPCmd(g *globals) *cobra.Command {
	var chat, user string
	cmd := &cobra.Command{
		Use:   "mcp --chat CHAT [--user USER]",
		Short: "Serve the enabled plugins' methods as MCP tools on stdin/stdout",
		Long: `Serve the enabled plugins' sandbox methods to an MCP client (Claude
Desktop, an IDE, an agent) over stdio: each method is a tool with an input
schema made from its parameters and its doc text as description.

Every call runs as the chat and user given here, as the chat's sandboxed
code would: a method acts in that chat only (a chat_key argument may be
left out; another chat is refused), what it sends lands in that chat's
history, its deadline and result limits are the sandbox's. Plugins
disabled (nekro plugins disable) or filtered out for the chat are neither
listed nor callable.

A desktop client's config entry:
  {"mcpServers": {"nekro": {"command": "nekro", "args": ["mcp", "--data", "/srv/nekro", "--chat", "me"]}}}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			id := mcp.Identity{ChatKey: chat, UserID: user}
			if err := id.Check(); err != nil {
				return fmt.Errorf("--chat/--user: %w", err)
			}
			ctx := cmd.Context()
			cfg := g.config()
			a, err := app.Open(ctx, cfg)
			if err != nil {
				return err
			}
			defer a.Close(ctx)
			srv := mcp.NewServer(mcp.ServerConfig{Host: a.Host, Store: a.Store, Chats: a.Chats,
				Files: cfg.Runtime.Files, CallTimeout: cfg.Runtime.CallTimeout, Log: cfg.Log})
			return srv.ServeStdio(ctx, id)
		},
	}
	cmd.Flags().StringVar(&chat, "chat", "", "chat every call acts in (required)")
	cmd.Flags().StringVar(&user, "user", "", "user every call runs as (ctx.UserID)")
	cmd.MarkFlagRequired("chat")
	return cmd
}
