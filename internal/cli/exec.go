package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/app"
	chatpkg "github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/sandbox"
)

func init() { subcommands = append(subcommands, newExecCmd) }

func newExecCmd(g *globals) *cobra.Command {
	var (
		chat, user string
		uploads    []string
		timeout    time.Duration
		asJSON     bool
		memoryOn   bool
	)
	cmd := &cobra.Command{
		Use:   "exec --chat CHAT [--user USER] [--upload FILE]... FILE.py|-",
		Short: "Run Python code in a chat's sandbox with every plugin's methods",
		Long: `Run Python code in a chat's sandbox, as the AI's code runs, with every
enabled plugin's sandbox methods callable, and print what it printed.

The exit status is 0 when the code ends normally, else its stop type:
1 ERROR, 2 TIMEOUT, 8 AGENT, 9 MANUAL, 11 MULTIMODAL_AGENT.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var code []byte
			var err error
			if args[0] == "-" {
				code, err = io.ReadAll(cmd.InOrStdin())
			} else {
				code, err = os.ReadFile(args[0])
			}
			if err != nil {
				return fmt.Errorf("read code: %w", err)
			}
			ctx := cmd.Context()
			// The quick half of doctor's interpreter check; the rest runs
			// only if the sandbox fails to start, not on every exec.
			if err := checkPythonPath(g.python, g.sandbox); err != nil {
				return err
			}
			cfg := g.config()
			cfg.Memory.Enabled = memoryOn // what plugins' memory services see (no turn runs to learn from)
			a, err := app.Open(ctx, cfg)
			if err != nil {
				return err
			}
			defer a.Close(ctx)
			// What the code sends to the chat (send_msg_text, ctx.SendText)
			// lands in the chat's history, as in a turn, and is echoed to
			// stderr so stdout stays what the code printed. The run is
			// recorded as the API's playground records it.
			chats := a.Chats
			events, stopEvents := chats.Subscribe(chat)
			echoed := make(chan struct{})
			go func() {
				defer close(echoed)
				for e := range events {
					if e.Type == chatpkg.EventMessage && e.Message != nil {
						m := e.Message
						for _, a := range m.Attachments {
							m.Text += fmt.Sprintf(" [%s %s]", a.Kind, a.Path)
						}
						fmt.Fprintf(cmd.ErrOrStderr(), "nekro: sent to chat %s: %s\n", chat, strings.TrimSpace(m.Text))
					}
				}
			}()
			for _, u := range uploads {
				if _, err := a.Runtime.ImportUpload(ctx, chat, u); err != nil {
					return err
				}
			}
			res, err := a.Agent.Exec(ctx, chat, user, string(code), sandbox.Limits{Timeout: timeout})
			stopEvents()
			<-echoed
			if err != nil {
				if _, perr := checkPython(ctx, g.python, g.sandbox); perr != nil {
					return fmt.Errorf("%w (%v)", perr, err)
				}
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(res); err != nil {
					return err
				}
			} else {
				io.WriteString(out, res.Output)
				if res.Note != "" {
					fmt.Fprintf(cmd.ErrOrStderr(), "nekro: %s: %s\n", res.StopType, res.Note)
				}
			}
			if res.StopType != sandbox.Normal {
				return &ExitError{Code: int(res.StopType)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&chat, "chat", "", "chat key the run answers (required)")
	cmd.Flags().BoolVar(&memoryOn, "memory", g.envBool("memory", false),
		"the long-term memory is on, as nekro serve --memory: Python plugins' memory services read the chat's memories (env NEKRO_MEMORY)")
	cmd.Flags().StringVar(&user, "user", "", "user id whose message started the run")
	cmd.Flags().StringArrayVar(&uploads, "upload", nil, "copy FILE into the chat's uploads first (/app/uploads/<name>); repeatable")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "wall-clock limit of the run (default 60s)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {stop_type, exit_code, output, duration_ms, calls} as JSON")
	cmd.MarkFlagRequired("chat")
	return cmd
}
