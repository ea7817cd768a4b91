package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/agent"
	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/server"
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
prompt (runtime contract, in the language of the chat's persona; the
persona chosen for the chat, or the default one; and the methods this
chat's code may call, after the plugins' method filters), then the plugins' injected context and the
chat's history, with its unanswered user messages as those to answer.
The history fits the model's context window as a turn's would: older
messages shown as the chat's kept summary, or left out with a note (no
summary is written here). --user names the user the turn would run for (it changes what user-scoped
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
	cmd.AddCommand(newChatsSendCmd(g))
	cmd.AddCommand(newChatMembersCmd(g)) // users.go
	return cmd
}

// newChatsSendCmd is `nekro chats send`: a user's message, with files,
// posted from the shell through the agent as the API posts one.
func newChatsSendCmd(g *globals) *cobra.Command {
	var (
		user, userName string
		paths          []string
	)
	var maxFile, maxMessage *byteSize
	cmd := &cobra.Command{
		Use:   "send CHAT --user USER [--user-name NAME] [--file FILE]... [TEXT]",
		Short: "Post a user's message, with files, to CHAT as POST /api/chats/{chat}/messages does",
		Long: `Post a message to CHAT as USER, as POST /api/chats/{chat}/messages does:
each --file is stored in the chat's uploads (the sandbox reads it at
/app/uploads/<name>; names are sanitized and never overwrite a file) and
shown as an attachment in the history and the prompt. TEXT (the words after
CHAT) may be left out when files are sent.

The message goes through the same path as the API's (chat commands are
answered at once, plugins' message hooks run), then waits in the database
for a turn: a nekro serve running on the same data directory (or database)
finds it within a second and answers it; otherwise the next nekro serve
does when it starts. This command needs no model.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			chatKey, text := args[0], strings.Join(args[1:], " ")
			if user == "" {
				return fmt.Errorf("--user is required: the id of the user the message is from")
			}
			if err := checkUploadLimits(maxFile, maxMessage); err != nil {
				return err
			}
			a, err := app.Open(ctx, g.config())
			if err != nil {
				return err
			}
			defer a.Close(ctx)
			up := a.Chats.NewUpload(chatKey)
			if err := addFiles(ctx, up, paths, int64(*maxFile), int64(*maxMessage)); err != nil {
				up.Discard()
				return err
			}
			m, err := a.Agent.Post(ctx, agent.Incoming{ChatKey: chatKey, UserID: user, UserName: userName, Text: text,
				Upload: up, Queue: true})
			if errors.Is(err, agent.ErrDropped) {
				return fmt.Errorf("nothing stored: %w", err)
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "message #%d stored in chat %s from %s\n", m.ID, chatKey, m.SenderName)
			for _, at := range m.Attachments {
				fmt.Fprintf(out, "  %s %s (%s, %d bytes)\n", at.Kind, at.Path, at.MIME, at.Size)
			}
			if m.TurnID == chat.NoTurn {
				// A command's answer, or a hook that keeps it without a turn.
				later, _, err := a.Chats.MessagesPage(ctx, chatKey, chat.MaxPageLimit, 0)
				if err != nil {
					return err
				}
				answered := false
				for _, r := range later {
					if r.ID > m.ID && r.Role == chat.Assistant {
						fmt.Fprintf(out, "answered by a chat command:\n%s\n", r.Text)
						answered = true
					}
				}
				if !answered {
					fmt.Fprintln(out, "kept without a turn: a plugin's message hook said so (it shows in the next turn's history)")
				}
				return nil
			}
			fmt.Fprintln(out, "it waits for a turn: a nekro serve on this data directory answers it within a second; if none runs, the next one to start does")
			return nil
		},
	}
	cmd.Flags().StringVar(&user, "user", "", "the id of the user the message is from (required)")
	cmd.Flags().StringVar(&userName, "user-name", "", "the user's display name (default: the id)")
	cmd.Flags().StringArrayVar(&paths, "file", nil, "a file to send with the message; repeatable")
	maxFile, maxMessage = addUploadFlags(cmd)
	return cmd
}

// addUploadFlags gives cmd --upload-max-file and --upload-max-message
// (env NEKRO_UPLOAD_MAX_FILE, NEKRO_UPLOAD_MAX_MESSAGE): the limits of
// the files a user sends with one message. nekro serve and chats send
// both offer them.
func addUploadFlags(cmd *cobra.Command) (maxFile, maxMessage *byteSize) {
	maxFile = envByteSize("NEKRO_UPLOAD_MAX_FILE", server.DefaultUploadMaxFile)
	maxMessage = envByteSize("NEKRO_UPLOAD_MAX_MESSAGE", server.DefaultUploadMaxMessage)
	cmd.Flags().Var(maxFile, "upload-max-file",
		"largest file a user may send with a message, e.g. 32MiB; larger ones are refused (413) (env NEKRO_UPLOAD_MAX_FILE)")
	cmd.Flags().Var(maxMessage, "upload-max-message",
		"largest total of the files of one message, e.g. 64MiB (env NEKRO_UPLOAD_MAX_MESSAGE)")
	return maxFile, maxMessage
}

// checkUploadLimits refuses a malformed environment value or a limit
// that is not a positive size ("none" included: uploads are always
// bounded).
func checkUploadLimits(maxFile, maxMessage *byteSize) error {
	if err := checkEnvSizes("NEKRO_UPLOAD_MAX_FILE", "NEKRO_UPLOAD_MAX_MESSAGE"); err != nil {
		return err
	}
	if *maxFile <= 0 || *maxMessage <= 0 {
		return fmt.Errorf("--upload-max-file and --upload-max-message must be sizes such as 32MiB (uploads are always bounded)")
	}
	return nil
}

// addFiles stores each file at paths in up, under its base name, within
// the per-file and per-message limits.
func addFiles(ctx context.Context, up *chat.Upload, paths []string, maxFile, maxMessage int64) error {
	if len(paths) > 32 {
		return fmt.Errorf("%d files: a message carries at most 32", len(paths))
	}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("--file: %w", err)
		}
		limit := min(maxFile, maxMessage-up.Bytes())
		_, err = up.Add(ctx, filepath.Base(p), f, limit)
		f.Close()
		switch {
		case errors.Is(err, chat.ErrAttachmentTooLarge) && limit == maxFile:
			return fmt.Errorf("%s is over the %d-byte limit of one file (--upload-max-file); nothing was stored", p, maxFile)
		case errors.Is(err, chat.ErrAttachmentTooLarge):
			return fmt.Errorf("the files are over the %d-byte limit of one message's files together (--upload-max-message); nothing was stored", maxMessage)
		case errors.Is(err, syscall.ENOSPC):
			return fmt.Errorf("the chat's uploads are full (--shared-quota, --shared-inodes); nothing was stored: %w", err)
		case err != nil:
			return err
		}
	}
	return nil
}
