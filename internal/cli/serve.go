package cli

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/adapterhost"
	"github.com/nekro-go/nekro/internal/agent"
	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/llm"
	"github.com/nekro-go/nekro/internal/memory"
	"github.com/nekro-go/nekro/internal/server"
)

func init() { subcommands = append(subcommands, newServeCmd) }

func newServeCmd(g *globals) *cobra.Command {
	var (
		listen           string
		commandPrefix    string
		superUsers       []string
		maxIterations    int
		shutdownTimeout  time.Duration
		zygotes          int
		timerTurns       int
		uploadMaxFile    *byteSize
		uploadMaxMessage *byteSize
	)
	var platforms *adapterhost.Settings // chat platforms' flags (--onebot-*), bound below
	var memoryOpts *memory.Options      // the long-term memory's flags (memories.go), bound below
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the chat API: messages answered by the model through sandboxed code",
		Long: `Serve nekro's HTTP API. It needs no configuration: chats, messages and
execution records go to the data directory's SQLite database (or PostgreSQL
with NEKRO_DATABASE_URL), code runs in bubblewrap sandboxes, and every call
needs the bearer token from NEKRO_API_TOKEN or, by default, the one
generated on first start (printed once, kept in <data>/api_token).

Messages are answered by an OpenAI-compatible model named by
NEKRO_LLM_BASE_URL, NEKRO_LLM_MODEL and NEKRO_LLM_API_KEY (or llm:
{base-url, model, api-key} in the config file). Without one,
POST /api/chats/{chat}/exec still runs code in a chat's sandbox.

Every flag has a NEKRO_ variable and a key in the config file (--config,
NEKRO_CONFIG, or <data>/nekro.yaml); a flag beats its variable, which
beats the file. nekro config show prints what serve would use and why.

SIGINT or SIGTERM stops the server gracefully: turns in progress may finish
until --shutdown-timeout, then their runs are stopped.`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{logDefaultAnnotation: "info"},
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
			ac.Agent = agent.Config{MaxIterations: maxIterations, CommandPrefix: commandPrefix, SuperUsers: superUsers}
			ac.Memory = *memoryOpts
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
				Build:            serverBuild(readVersion()),
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
			logStart(ac, srv.Addr, dataDir, g.file)
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
	cmd.Flags().IntVar(&zygotes, "zygotes", int(g.envInt("zygotes", 8)),
		"warm per-chat zygotes kept for chats that run often (runs start in ~1 ms, numpy and matplotlib loaded for chats whose code used them); 0: a new sandbox per run (env NEKRO_ZYGOTES)")
	cmd.Flags().StringVar(&listen, "listen", envOr("NEKRO_LISTEN", server.DefaultListen), "address to listen on (env NEKRO_LISTEN)")
	g.define(cmd.Flags(), "llm-base-url")
	g.define(cmd.Flags(), "llm-model")
	cmd.Flags().IntVar(&maxIterations, "max-iterations", int(g.envInt("max-iterations", agent.DefaultMaxIterations)),
		"sandbox runs (and model requests) per turn at most (env NEKRO_MAX_ITERATIONS)")
	cmd.Flags().StringVar(&commandPrefix, "command-prefix", envOr("NEKRO_COMMAND_PREFIX", agent.DefaultCommandPrefix),
		"what starts a chat command, as in /help (env NEKRO_COMMAND_PREFIX)")
	cmd.Flags().StringSliceVar(&superUsers, "super-users", envCommaList("NEKRO_SUPER_USERS"),
		"user ids that may use every chat command, comma-separated (env NEKRO_SUPER_USERS)")
	cmd.Flags().IntVar(&timerTurns, "timer-turns-per-hour", int(g.envInt("timer-turns-per-hour", DefaultTimerTurnsPerHour)),
		"turns one chat's timers may wake the model in any hour; past it their messages wait, unanswered, for the chat's next turn; 0: no limit (env NEKRO_TIMER_TURNS_PER_HOUR)")
	cmd.Flags().DurationVar(&shutdownTimeout, "shutdown-timeout", g.envDuration("shutdown-timeout", server.DefaultShutdownTimeout),
		"how long turns may finish after SIGINT/SIGTERM (env NEKRO_SHUTDOWN_TIMEOUT)")
	uploadMaxFile, uploadMaxMessage = addUploadFlags(cmd) // chats.go
	memoryOpts = addMemoryFlags(cmd, g)
	// Every registered chat platform's settings (--onebot-*).
	platforms = adapterhost.Bind(cmd.Flags())
	return cmd
}

// logStart logs, at info, what this serve runs with: where it listens,
// its data, the config file, and each model group without its key (each
// chat platform adapter logs its own start, connections and drops).
func logStart(ac app.Config, addr, dataDir string, file *configFileData) {
	args := []any{"listen", addr, "data", dataDir, "database", "sqlite"}
	if ac.DatabaseURL != "" {
		args[len(args)-1] = databaseURL{&ac.DatabaseURL}.String()
	}
	if file != nil {
		args = append(args, "config", file.path)
	}
	ac.Log.Info("nekro serving", args...)
	if ac.LLM.Model != "" {
		ac.Log.Info("model group", "group", "chat", "model", ac.LLM.Model, "base_url", redactURL(ac.LLM.BaseURL), "key", ac.LLM.APIKey != "")
	} else {
		ac.Log.Info("no model configured: messages are refused until one is", "set", llm.EnvBaseURL+", "+llm.EnvModel)
	}
	names := make([]string, 0, len(ac.ModelGroups))
	for n := range ac.ModelGroups {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		c := ac.ModelGroups[n]
		ac.Log.Info("model group", "group", n, "model", c.Model, "base_url", redactURL(c.BaseURL), "key", c.APIKey != "")
	}
}

// redactURL is u with a password in it masked.
func redactURL(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.Redacted()
	}
	return u
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
