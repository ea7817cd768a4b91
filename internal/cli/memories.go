package cli

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/memory"
)

func init() {
	subcommands = append(subcommands, newMemoriesCmd)
	// The memory's settings: nekro serve's flags, with their variables.
	flagEnv["memory"] = "NEKRO_MEMORY"
	flagEnv["memory-users-across-chats"] = "NEKRO_MEMORY_USERS_ACROSS_CHATS"
	flagEnv["memory-per-hour"] = "NEKRO_MEMORY_PER_HOUR"
	flagEnv["memory-min-messages"] = "NEKRO_MEMORY_MIN_MESSAGES"
	commandFlags["memories"] = storeFlagNames
}

// addMemoryFlags gives nekro serve the long-term memory's settings and
// returns them, read once the flags are parsed.
func addMemoryFlags(cmd *cobra.Command, g *globals) *memory.Options {
	o := &memory.Options{}
	cmd.Flags().BoolVar(&o.Enabled, "memory", g.envBool("memory", false),
		"learn long-term memories of chats and users after turns (the model group memory, else the chat group) and recall them into prompts (env NEKRO_MEMORY)")
	cmd.Flags().BoolVar(&o.UsersAcrossChats, "memory-users-across-chats", g.envBool("memory-users-across-chats", false),
		"recall what was learned about a user in every chat the user writes in; default: only in the chat it was learned in (env NEKRO_MEMORY_USERS_ACROSS_CHATS)")
	cmd.Flags().IntVar(&o.PerHour, "memory-per-hour", int(g.envInt("memory-per-hour", memory.DefaultPerHour)),
		"memory extractions (memory model requests) one chat may cause in any hour (env NEKRO_MEMORY_PER_HOUR)")
	cmd.Flags().IntVar(&o.MinMessages, "memory-min-messages", int(g.envInt("memory-min-messages", memory.DefaultMinMessages)),
		"new user messages a chat needs before its next memory extraction (env NEKRO_MEMORY_MIN_MESSAGES)")
	return o
}

// envBool reads flag's environment variable as a boolean, or def when it
// is unset; a value that is not one is kept as the flag's error.
func (g *globals) envBool(flag string, def bool) bool {
	env := flagEnv[flag]
	v, ok := os.LookupEnv(env)
	if !ok || v == "" {
		return def
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true
	case "0", "false", "no", "off":
		return false
	}
	g.envErrs[flag] = fmt.Errorf("%s=%q is not true or false: fix or unset it (it is the default of --%s)", env, v, flag)
	return def
}

// openMemories opens the memories of an existing database: a wrong
// --data is an error, not a new empty database (as for nekro kv).
func openMemories(cmd *cobra.Command, g *globals) (*app.App, error) {
	return (&kvFlags{}).openWith(cmd, g, app.OpenMemories)
}

func newMemoriesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "memories",
		Short: "List and delete the long-term memories of chats",
		Long: `List and delete what nekro's long-term memory (nekro serve --memory) learned
in a chat: facts about the chat and about each of its users. A deleted
memory is gone with its vector; the messages it was learned from are never
read for memories again. nekro kv erase-user erases a user's memories in
every chat; resetting a chat erases the chat's.`,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "list CHAT",
		Short: "Print the memories learned in CHAT: id, about whom, when, text",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := openMemories(cmd, g)
			if err != nil {
				return err
			}
			defer a.Close(cmd.Context())
			ms, err := a.Memories.List(cmd.Context(), args[0], memory.Filter{})
			if err != nil {
				return err
			}
			if len(ms) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "no memories of chat %s\n", args[0])
				return nil
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tABOUT\tUPDATED\tTEXT")
			for _, m := range ms {
				who := "chat"
				if m.UserID != "" {
					who = "user " + m.UserID
				}
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", m.ID, who, m.UpdatedAt.Format("2006-01-02 15:04"),
					strings.ReplaceAll(m.Text, "\n", " "))
			}
			return w.Flush()
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:     "rm CHAT ID",
		Aliases: []string{"delete"},
		Short:   "Delete one memory of CHAT, and its vector",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[1], 10, 64)
			if err != nil {
				return fmt.Errorf("memory id %q is not a number (nekro memories list %s shows them)", args[1], args[0])
			}
			a, err := openMemories(cmd, g)
			if err != nil {
				return err
			}
			defer a.Close(cmd.Context())
			if err := a.Memories.Delete(cmd.Context(), args[0], id); err != nil {
				if errors.Is(err, memory.ErrNotFound) {
					return fmt.Errorf("chat %s has no memory %d (nekro memories list %s shows them)", args[0], id, args[0])
				}
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "memory %d of chat %s deleted\n", id, args[0])
			return nil
		},
	})
	return cmd
}
