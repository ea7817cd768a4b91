// Package cli implements the nekro command line. Each subcommand lives in
// its own file and only parses flags and calls the runtime.
package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/kv"
	"github.com/nekro-go/nekro/internal/llm"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/uids"
)

// globals are the flags every subcommand shares.
type globals struct {
	dataDir     string
	database    string // database URL; "" is SQLite in the data directory
	python      string
	logLevel    string
	sandbox     string
	image       string
	plugins     string
	pluginDirs  []string // --plugin-dir: Python plugins
	pythonIndex string
	callTimeout time.Duration
	maxRuns     int
	kvValue     int64
	kvQuota     *byteSize

	sandboxUIDs  string // FIRST-LAST: each chat's own uid comes from here
	sharedQuota  *byteSize
	sharedInodes int64
	pluginQuota  *byteSize
	uidRange     uids.Range // parsed from sandboxUIDs
}

// kvQuotaHint ends a KV quota refusal, for the plugin's log and the AI.
const kvQuotaHint = "the operator sets the quota with --kv-quota or NEKRO_KV_QUOTA"

// kvQuotaBytes is --kv-quota as kv.Limits takes it (negative: none).
func (g *globals) kvQuotaBytes() int64 {
	if *g.kvQuota == 0 {
		return noLimit // "0" read as no quota, as before sizes had units
	}
	return int64(*g.kvQuota)
}

// ExitError asks Main to exit with Code after printing nothing more.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// commands added by other files of this package.
var subcommands []func(g *globals) *cobra.Command

// NewRoot returns the nekro root command.
func NewRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "nekro",
		Short:         "nekro: a self-hosted runtime for AI-agent plugins",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) (err error) {
			if err := checkEnvSizes("NEKRO_SHARED_QUOTA", "NEKRO_PLUGIN_DATA_QUOTA", "NEKRO_KV_QUOTA"); err != nil {
				return err
			}
			for flag, v := range map[string]*byteSize{"--shared-quota": g.sharedQuota, "--plugin-data-quota": g.pluginQuota} {
				if *v <= 0 {
					return fmt.Errorf("%s must be a size such as 1GiB: it is the size of a filesystem", flag)
				}
			}
			if g.uidRange, err = uids.ParseRange(g.sandboxUIDs); err != nil {
				return fmt.Errorf("--sandbox-uids: %w", err)
			}
			return nil
		},
	}
	g.sharedQuota = envByteSize("NEKRO_SHARED_QUOTA", runtime.DefaultSharedQuota)
	g.pluginQuota = envByteSize("NEKRO_PLUGIN_DATA_QUOTA", runtime.DefaultPluginDataQuota)
	g.kvQuota = envByteSize("NEKRO_KV_QUOTA", kv.DefaultQuotaBytes)
	root.PersistentFlags().StringVar(&g.dataDir, "data", envOr("NEKRO_DATA_DIR", "data"), "data directory (env NEKRO_DATA_DIR)")
	root.PersistentFlags().StringVar(&g.database, "database", os.Getenv(db.EnvDatabaseURL),
		"database URL, e.g. postgres://... (env "+db.EnvDatabaseURL+"); empty means SQLite in the data directory")
	root.PersistentFlags().StringVar(&g.python, "python", envOr("NEKRO_PYTHON", "/usr/bin/python3"), "Python interpreter inside the sandbox (env NEKRO_PYTHON)")
	root.PersistentFlags().StringVar(&g.sandbox, "sandbox", envOr("NEKRO_SANDBOX", "bwrap"), "sandbox backend: bwrap or docker (env NEKRO_SANDBOX)")
	root.PersistentFlags().StringVar(&g.image, "docker-image", envOr("NEKRO_DOCKER_IMAGE", "nekro-sandbox"), "image of the docker sandbox backend (env NEKRO_DOCKER_IMAGE)")
	root.PersistentFlags().StringVar(&g.plugins, "plugins", envOr("NEKRO_PLUGINS", "all"), "plugins to enable: all, or a comma-separated list of keys (author.module); nekro.basic is always on (env NEKRO_PLUGINS)")
	root.PersistentFlags().StringArrayVar(&g.pluginDirs, "plugin-dir", envList("NEKRO_PLUGIN_DIR"),
		"directory of Python plugins (*.py files and packages defining `plugin`); repeatable (env NEKRO_PLUGIN_DIR, paths joined by :)")
	root.PersistentFlags().StringVar(&g.pythonIndex, "python-index", os.Getenv("NEKRO_PYTHON_INDEX"),
		"where Python plugins' missing packages are installed from: a package index URL, or a directory of wheels (env NEKRO_PYTHON_INDEX)")
	root.PersistentFlags().DurationVar(&g.callTimeout, "call-timeout", envDuration("NEKRO_CALL_TIMEOUT", 0),
		"how long one sandbox method call may take unless the method sets its own (default 60s; env NEKRO_CALL_TIMEOUT)")
	root.PersistentFlags().IntVar(&g.maxRuns, "max-runs", envInt("NEKRO_MAX_RUNS", 8), "sandbox runs at once, across all chats (env NEKRO_MAX_RUNS)")
	root.PersistentFlags().Int64Var(&g.kvValue, "kv-max-value", envInt("NEKRO_KV_MAX_VALUE", int64(1<<20)), "largest KV value in bytes (env NEKRO_KV_MAX_VALUE)")
	root.PersistentFlags().Var(g.kvQuota, "kv-quota", "disk each plugin's KV values may take up, e.g. 256MiB, or none (env NEKRO_KV_QUOTA)")
	root.PersistentFlags().StringVar(&g.sandboxUIDs, "sandbox-uids", envOr("NEKRO_SANDBOX_UIDS", uids.DefaultRange.String()),
		"host uids for chats' sandboxes, FIRST-LAST: each chat gets its own, kept in the database (env NEKRO_SANDBOX_UIDS; used when nekro runs as root)")
	root.PersistentFlags().Var(g.sharedQuota, "shared-quota",
		"disk each chat's /app/shared and /app/uploads may each take, enforced while the code writes, e.g. 64MiB (env NEKRO_SHARED_QUOTA)")
	root.PersistentFlags().Int64Var(&g.sharedInodes, "shared-inodes", envInt("NEKRO_SHARED_INODES", int64(runtime.DefaultSharedInodes)),
		"files and directories each chat's /app/shared and /app/uploads may each hold (env NEKRO_SHARED_INODES)")
	root.PersistentFlags().Var(g.pluginQuota, "plugin-data-quota",
		"disk each plugin's data directory may take, e.g. 1GiB (env NEKRO_PLUGIN_DATA_QUOTA)")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", envOr("NEKRO_LOG_LEVEL", "warn"), "debug, info, warn or error (env NEKRO_LOG_LEVEL)")
	for _, sub := range subcommands {
		root.AddCommand(sub(g))
	}
	return root
}

// Main runs the CLI with os.Args and exits.
func Main() {
	closeInheritedOnExec()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := NewRoot().ExecuteContext(ctx)
	stop()
	if err != nil {
		var exit *ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.Code)
		}
		fmt.Fprintln(os.Stderr, "nekro:", err)
		os.Exit(1)
	}
}

// envInt reads an integer environment variable, or def when it is unset
// or not a number.
func envInt[T int | int64](name string, def T) T {
	if v, err := strconv.ParseInt(os.Getenv(name), 10, 64); err == nil {
		return T(v)
	}
	return def
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func (g *globals) logger() *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.ToUpper(g.logLevel))); err != nil {
		level = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// enableList returns the keys --plugins names, or nil for all.
func (g *globals) enableList() []string {
	if strings.TrimSpace(g.plugins) == "all" {
		return nil
	}
	keys := []string{}
	for _, k := range strings.Split(g.plugins, ",") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// config returns the configuration the shared flags describe.
func (g *globals) config() app.Config {
	chatModel := llm.ConfigFromEnv()
	return app.Config{DataDir: g.dataDir, DatabaseURL: g.database, Log: g.logger(),
		// Plugins may ask the operator's models (Ctx.AskModel) from any
		// command that runs code, nekro exec included.
		LLM: chatModel, ModelGroups: llm.GroupsFromEnv(chatModel),
		KV:         kv.Limits{MaxValueBytes: g.kvValue, QuotaBytes: g.kvQuotaBytes(), QuotaHint: kvQuotaHint},
		PluginDirs: g.pluginDirs, Enable: g.enableList(), PythonIndex: g.pythonIndex,
		Runtime: runtime.Config{Python: g.python, MaxConcurrentRuns: g.maxRuns, CallTimeout: g.callTimeout,
			SandboxUIDs: g.uidRange, SharedQuota: int64(*g.sharedQuota), SharedInodes: g.sharedInodes,
			PluginDataQuota: int64(*g.pluginQuota),
			Sandbox:         g.sandbox, DockerImage: g.image, DockerArgs: strings.Fields(os.Getenv("NEKRO_DOCKER_ARGS")),
			Files: files.Options{AllowPrivateNetworks: envTrue(files.AllowPrivateEnv)}}}
}

// envDuration reads a duration from the environment variable name, or def
// when it is unset or malformed.
func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

// envList splits the environment variable name at ":", dropping empty
// parts.
func envList(name string) []string {
	var out []string
	for _, p := range strings.Split(os.Getenv(name), ":") {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// envTrue reports whether the environment variable name is set to 1, true
// or yes.
func envTrue(name string) bool {
	switch strings.ToLower(os.Getenv(name)) {
	case "1", "true", "yes":
		return true
	}
	return false
}
