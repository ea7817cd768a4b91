package cli

import (
	"context"
	"fmt"
	"github.com/nekro-go/nekro/internal/llm"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/adapterhost"
	"github.com/nekro-go/nekro/internal/agent"
	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/server"
)

func init() { subcommands = append(subcommands, newServeCmd) }

func newServeCmd(g *globals) *cobra.Command {
	var (
		listen, baseURL, model string
		commandPrefix          string
		superUsers             []string
		maxIterations          int
		shutdownTimeout        time.Duration
		zygotes                int
		timerTurns             int
		uploadMaxFile          *byteSize
		uploadMaxMessage       *byteSize
	)
	var platforms *adapterhost.Settings // chat platforms' flags (--onebot-*), bound below
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the chat API: messages answered by the model through sandboxed code",
		Long: `Serve nekro's HTTP API. It needs no configuration: chats, messages and
execution records go to the data directory's SQLite database (or PostgreSQL
with NEKRO_DATABASE_URL), code runs in bubblewrap sandboxes, and every call
needs the bearer token from NEKRO_API_TOKEN or, by default, the one
generated on first start (printed once, kept in <data>/api_token).

Messages are answered by an OpenAI-compatible model named by
NEKRO_LLM_BASE_URL, NEKRO_LLM_MODEL and NEKRO_LLM_API_KEY. Without one,
POST /api/chats/{chat}/exec still runs code in a chat's sandbox.

SIGINT or SIGTERM stops the server gracefully: turns in progress may finish
until --shutdown-timeout, then their runs are stopped.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if _, err := checkPython(ctx, g.python, g.sandbox); err != nil {
				return err
			}
			if err := checkUploadLimits(uploadMaxFile, uploadMaxMessage); err != nil {
				return err
			}
			ac := g.config()
			ac.Runtime.WarmSpares = true
			ac.Runtime.SharedIdle = 30 * time.Minute
			ac.Host.FireTimers = true
			ac.Host.TimerTurnsPerHour = timerTurns
			ac.Sandbox.Zygotes = zygotes
			ac.LLM = llm.ConfigFromEnv()
			ac.LLM.BaseURL, ac.LLM.Model = baseURL, model
			ac.ModelGroups = llm.GroupsFromEnv(ac.LLM)
			ac.Agent = agent.Config{MaxIterations: maxIterations, CommandPrefix: commandPrefix, SuperUsers: superUsers}
			adapters, err := platforms.Open()
			if err != nil {
				return err
			}
			ac.Adapters = adapters
			srv, err := app.Serve(ctx, ac, server.Options{
				Listen:           listen,
				Token:            os.Getenv(server.EnvAPIToken),
				TokenOut:         cmd.OutOrStdout(),
				ShutdownTimeout:  shutdownTimeout,
				UploadMaxFile:    int64(*uploadMaxFile),
				UploadMaxMessage: int64(*uploadMaxMessage),
				Log:              ac.Log,
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			dataDir, err := filepath.Abs(ac.DataDir)
			if err != nil {
				dataDir = ac.DataDir
			}
			fmt.Fprintf(out, "nekro: serving on http://%s (data %s)\n", srv.Addr, dataDir)
			if srv.Model != "" {
				fmt.Fprintf(out, "nekro: model %s at %s\n", srv.Model, ac.LLM.BaseURL)
			} else {
				fmt.Fprintf(out, "nekro: no model configured: messages are refused until %s and %s are set; "+
					"POST /api/chats/{chat}/exec works now\n", llm.EnvBaseURL, llm.EnvModel)
			}
			<-ctx.Done()
			fmt.Fprintln(cmd.ErrOrStderr(), "nekro: shutting down")
			return srv.Shutdown(context.WithoutCancel(ctx))
		},
	}
	cmd.Flags().IntVar(&zygotes, "zygotes", 8, "warm per-chat zygotes kept (runs start in ~1 ms with numpy and matplotlib loaded); 0: a new sandbox per run")
	cmd.Flags().StringVar(&listen, "listen", envOr("NEKRO_LISTEN", server.DefaultListen), "address to listen on (env NEKRO_LISTEN)")
	cmd.Flags().StringVar(&baseURL, "llm-base-url", os.Getenv(llm.EnvBaseURL), "OpenAI-compatible API root, e.g. https://api.openai.com/v1 (env "+llm.EnvBaseURL+")")
	cmd.Flags().StringVar(&model, "llm-model", os.Getenv(llm.EnvModel), "model name (env "+llm.EnvModel+"); the API key is read from "+llm.EnvAPIKey+" only")
	cmd.Flags().IntVar(&maxIterations, "max-iterations", agent.DefaultMaxIterations, "sandbox runs (and model requests) per turn at most")
	cmd.Flags().StringVar(&commandPrefix, "command-prefix", envOr("NEKRO_COMMAND_PREFIX", agent.DefaultCommandPrefix),
		"what starts a chat command, as in /help (env NEKRO_COMMAND_PREFIX)")
	cmd.Flags().StringSliceVar(&superUsers, "super-users", envCommaList("NEKRO_SUPER_USERS"),
		"user ids that may use every chat command, comma-separated (env NEKRO_SUPER_USERS)")
	cmd.Flags().IntVar(&timerTurns, "timer-turns-per-hour", int(g.envInt("timer-turns-per-hour", DefaultTimerTurnsPerHour)),
		"turns one chat's timers may wake the model in any hour; past it their messages wait, unanswered, for the chat's next turn; 0: no limit (env NEKRO_TIMER_TURNS_PER_HOUR)")
	cmd.Flags().DurationVar(&shutdownTimeout, "shutdown-timeout", server.DefaultShutdownTimeout, "how long turns may finish after SIGINT/SIGTERM")
	uploadMaxFile, uploadMaxMessage = addUploadFlags(cmd) // chats.go
	// Every registered chat platform's settings (--onebot-*).
	platforms = adapterhost.Bind(cmd.Flags())
	return cmd
}

// envCommaList splits the environment variable name at commas, dropping
// empty parts.
func envCommaList(name string) []string {
	var out []string
	for _, p := range strings.Split(os.Getenv(name), ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// DefaultTimerTurnsPerHour is --timer-turns-per-hour's default: a chat
// may keep 50 recurring jobs, each due every minute; this many turns an
// hour is what a reminder-heavy chat needs, and bounds what one chat's
// timers cost a shared host and its model account.
const DefaultTimerTurnsPerHour = 20
