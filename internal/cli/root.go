// Package cli implements the nekro command line. Each subcommand lives in
// its own file and only parses flags and calls the parts internal/app
// assembles.
package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/kv"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/uids"
)

// globals are the flags several subcommands share. Each field holds its
// default (or its environment variable's value) from the start, so
// g.config() describes the operator's configuration also for a command
// that does not offer the flag; flags.go says which commands offer which.
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
	mcpConfig   string // --mcp-config: MCP servers as plugins mcp.NAME
	callTimeout time.Duration
	maxRuns     int
	kvValue     int64
	kvQuota     *byteSize

	sandboxUIDs  string // FIRST-LAST: each chat's own uid comes from here
	sharedQuota  *byteSize
	sharedInodes int64
	pluginQuota  *byteSize
	uidRange     uids.Range // parsed from sandboxUIDs
	// sandboxTemplate: fresh bwrap sandboxes fork from one template
	sandboxTemplate bool

	llmBaseURL string // --llm-base-url
	llmModel   string // --llm-model

	// defaultLevel is the log level when --log-level is not set: info for
	// serve, warn for commands an operator runs by hand.
	defaultLevel slog.Level

	// envErrs holds, per flag name, why its environment variable's value
	// was refused; check reports it for a command offering the flag.
	envErrs map[string]error

	configFile string          // --config, NEKRO_CONFIG
	file       *configFileData // the config file read, nil without one
	// fromFile says, per setting the config file gave this command, where:
	// "FILE:LINE".
	fromFile map[string]string
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

// Command annotations the root's pre-run reads.
const (
	// logDefaultAnnotation is the command's log level when --log-level
	// and NEKRO_LOG_LEVEL are not set (default warn).
	logDefaultAnnotation = "nekro-log-default"
	// noConfigAnnotation marks a command that reads no config file
	// (version: a broken file must not hide which binary this is).
	noConfigAnnotation = "nekro-no-config"
)

// commands added by other files of this package.
var subcommands []func(g *globals) *cobra.Command

// NewRoot returns the nekro root command.
func NewRoot() *cobra.Command {
	g := newGlobals()
	root := &cobra.Command{
		Use:           "nekro",
		Short:         "nekro: a self-hosted runtime for AI-agent plugins",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionLine(readVersion()),
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if lvl := cmd.Annotations[logDefaultAnnotation]; lvl != "" {
				g.defaultLevel.UnmarshalText([]byte(lvl))
			}
			if readsConfig(cmd) {
				if err := g.loadConfig(cmd); err != nil {
					return err
				}
			}
			if err := g.check(cmd); err != nil {
				return err
			}
			warnSecretFlags(cmd.Flags(), g.logger())
			return nil
		},
	}
	root.SetVersionTemplate("nekro {{.Version}}\n")
	root.PersistentFlags().StringVar(&g.configFile, "config", g.configFile,
		"config file: YAML whose keys are the long flag names; default <data>/nekro.yaml when present (env "+EnvConfig+")")
	for _, sub := range subcommands {
		root.AddCommand(sub(g))
	}
	g.scopeFlags(root)
	return root
}

// readsConfig reports whether cmd reads the config file: every command
// but version and cobra's help and completion, which must work whatever
// the file says.
func readsConfig(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if c.Annotations[noConfigAnnotation] != "" || (c.HasParent() && !c.Parent().HasParent() && (c.Name() == "help" || c.Name() == "completion")) {
			return false
		}
	}
	return true
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

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func (g *globals) logger() *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.ToUpper(g.logLevel))); err != nil {
		level = g.defaultLevel
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
	chatModel, groups := g.models()
	return app.Config{DataDir: g.dataDir, DatabaseURL: g.database, Log: g.logger(),
		// Plugins may ask the operator's models (Ctx.AskModel) from any
		// command that runs code, nekro exec included.
		LLM: chatModel, ModelGroups: groups,
		KV:         kv.Limits{MaxValueBytes: g.kvValue, QuotaBytes: g.kvQuotaBytes(), QuotaHint: kvQuotaHint},
		PluginDirs: g.pluginDirs, Enable: g.enableList(), PythonIndex: g.pythonIndex, MCPConfig: g.mcpConfig,
		Sandbox: app.SandboxConfig{Backend: g.sandbox, Python: g.python, UIDs: g.uidRange, Template: g.sandboxTemplate,
			DockerImage: g.image, DockerArgs: strings.Fields(os.Getenv("NEKRO_DOCKER_ARGS"))},
		Runtime: runtime.Config{MaxConcurrentRuns: g.maxRuns, CallTimeout: g.callTimeout,
			SharedQuota: int64(*g.sharedQuota), SharedInodes: g.sharedInodes, PluginDataQuota: int64(*g.pluginQuota),
			Files: files.Options{AllowPrivateNetworks: envTrue(files.AllowPrivateEnv)}}}
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
// envBool is the boolean in environment variable name: 1/true/yes or
// 0/false/no, def when it is unset or anything else.
func envBool(name string, def bool) bool {
	switch strings.ToLower(os.Getenv(name)) {
	case "1", "true", "yes":
		return true
	case "0", "false", "no":
		return false
	}
	return def
}

func envTrue(name string) bool {
	switch strings.ToLower(os.Getenv(name)) {
	case "1", "true", "yes":
		return true
	}
	return false
}
