package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/users"
)

func init() { subcommands = append(subcommands, newUsersCmd) }

// openUsers opens the database and the users store on it, nothing else;
// a running nekro serve sees the change on the next request. Unless
// create, a data directory without a database is an error (a mistyped
// --data), not a new empty one.
func openUsers(ctx context.Context, g *globals, create bool) (*users.Store, func(), error) {
	cfg := g.config()
	if cfg.DatabaseURL == "" && !create {
		layout, err := files.NewLayout(cfg.DataDir)
		if err != nil {
			return nil, nil, err
		}
		if _, err := os.Stat(layout.Database()); err != nil {
			return nil, nil, fmt.Errorf("no database at %s (wrong --data? start `nekro serve` once to create it)", layout.Database())
		}
	}
	a, err := app.OpenStore(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	st, err := users.Open(ctx, a.DB)
	if err != nil {
		a.Close(ctx)
		return nil, nil, err
	}
	return st, func() { st.Close(); a.Close(ctx) }, nil
}

func printToken(cmd *cobra.Command, what, tok string) {
	fmt.Fprintf(cmd.OutOrStdout(), "%s; its token (shown once, only its hash is kept):\n\n    %s\n\n"+
		"Send it as `Authorization: Bearer <token>`.\n", what, tok)
}

func newUsersCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "users",
		Short: "Manage the API's users and their tokens",
		Long: `Users call the API with a token of their own instead of the operator's:
they see and post in their own chats only (a new chat, with no members and
no history, becomes the chat of the first user who posts to it; the
operator adds users to others with
` + "`nekro chats members`" + `), always as themselves, and get 403 from the
operator's calls (the playground, plugins, users). A token is shown once;
the database keeps only its SHA-256.`,
	}
	var name string
	add := &cobra.Command{
		Use:   "add ID",
		Short: "Add a user and print its token, once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, done, err := openUsers(cmd.Context(), g, true)
			if err != nil {
				return err
			}
			defer done()
			u, tok, err := st.Add(cmd.Context(), args[0], name)
			if err != nil {
				return err
			}
			printToken(cmd, fmt.Sprintf("user %s (%s) added", u.ID, u.Name), tok)
			return nil
		},
	}
	add.Flags().StringVar(&name, "name", "", "the user's display name (default: the id)")
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the users, their token counts and chats",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, done, err := openUsers(cmd.Context(), g, false)
			if err != nil {
				return err
			}
			defer done()
			list, err := st.List(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"users": list})
			}
			if len(list) == 0 {
				fmt.Fprintln(out, "no users (add one with `nekro users add ID`)")
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "USER\tNAME\tTOKENS\tCREATED\tCHATS")
			for _, u := range list {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", u.ID, u.Name, u.Tokens, u.Created.Local().Format(time.DateTime), strings.Join(u.Chats, ","))
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, `print {"users": [...]}`)
	remove := &cobra.Command{
		Use:   "remove ID",
		Short: "Remove a user: its tokens stop working at once; its chats stay",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, done, err := openUsers(cmd.Context(), g, false)
			if err != nil {
				return err
			}
			defer done()
			if err := st.Remove(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "user %s removed; its tokens no longer work\n", args[0])
			return nil
		},
	}
	token := &cobra.Command{
		Use:   "token ID",
		Short: "Give a user another token (the others keep working) and print it, once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, done, err := openUsers(cmd.Context(), g, false)
			if err != nil {
				return err
			}
			defer done()
			tok, err := st.NewToken(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			printToken(cmd, "a new token for "+args[0], tok)
			return nil
		},
	}
	cmd.AddCommand(add, list, remove, token)
	g.addStoreFlags(cmd) // the database is all it opens
	return cmd
}

// newChatMembersCmd is `nekro chats members`.
func newChatMembersCmd(g *globals) *cobra.Command {
	var adds, removes []string
	cmd := &cobra.Command{
		Use:   "members CHAT",
		Short: "List a chat's members; --add and --remove change them",
		Long: `List the users who belong to CHAT (they read and post in it with their
tokens). --add USER and --remove USER (repeatable) change the members
first. Users claim only new chats (no members, no history): a chat with
history, such as a chat platform's, is reached only through --add.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, chatKey := cmd.Context(), args[0]
			st, done, err := openUsers(ctx, g, false)
			if err != nil {
				return err
			}
			defer done()
			for _, u := range adds {
				if err := st.AddMember(ctx, chatKey, u); err != nil {
					return err
				}
			}
			for _, u := range removes {
				was, err := st.RemoveMember(ctx, chatKey, u)
				if err != nil {
					return err
				}
				if !was {
					return fmt.Errorf("%s is not a member of chat %s", u, chatKey)
				}
			}
			m, err := st.Members(ctx, chatKey)
			if err != nil {
				return err
			}
			if len(m) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "chat %s has no members (a user reaches it only when added, or by posting first to it while it has no history)\n", chatKey)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "chat %s: %s\n", chatKey, strings.Join(m, " "))
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&adds, "add", nil, "add this user (repeatable)")
	cmd.Flags().StringArrayVar(&removes, "remove", nil, "remove this user (repeatable)")
	return cmd
}
