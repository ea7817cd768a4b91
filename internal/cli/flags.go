package cli

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/kv"
	"github.com/nekro-go/nekro/internal/llm"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/uids"
)

// The shared flags, by what they configure. A command offers only the
// groups it uses (commandFlags), so its --help lists what applies to it.
var (
	// storeFlagNames: where the data lives, and the log.
	storeFlagNames = []string{"data", "database", "log-level"}
	// kvLimitFlagNames: the KV store's limits.
	kvLimitFlagNames = []string{"kv-max-value", "kv-quota"}
	// pluginFlagNames: which plugins load, Python plugins, MCP servers, plugins' data.
	pluginFlagNames = []string{"plugins", "plugin-dir", "python-index", "mcp-config", "plugin-data-quota"}
	// sandboxFlagNames: how code runs.
	sandboxFlagNames = []string{"python", "sandbox", "docker-image", "call-timeout", "max-runs",
		"sandbox-uids", "sandbox-template", "shared-quota", "shared-inodes"}
	// runtimeFlagNames: everything app.Open uses.
	runtimeFlagNames = slices.Concat(storeFlagNames, kvLimitFlagNames, pluginFlagNames, sandboxFlagNames)
)

// commandFlags says which shared flags each command offers (persistent, so
// its subcommands offer them too), by its path below the root. A top-level
// command missing here, and not declaring its own with g.addFlags and the
// add*Flags helpers, gets runtimeFlagNames: every shared flag, as all
// commands had before the flags were scoped.
var commandFlags = map[string][]string{
	"exec":   runtimeFlagNames,
	"serve":  runtimeFlagNames,
	"doctor": runtimeFlagNames,
	"chats":  runtimeFlagNames, // chats open the host: reset runs plugins' hooks
	// Listing plugins starts Python plugins' processes; nothing else.
	"plugins":         {"data", "log-level", "plugins", "plugin-dir", "python-index", "mcp-config"},
	"plugins config":  {"plugin-data-quota"}, // the settings file lives on the plugin's data volume
	"plugins enable":  {"database"},
	"plugins disable": {"database"},
	// --plugin-dir lets kv accept a Python plugin's key before it stored anything.
	"kv":          slices.Concat(storeFlagNames, kvLimitFlagNames, []string{"plugin-dir", "python-index"}),
	"bench":       nil,
	"bench spine": {"python", "sandbox-template"},
	"bench turn":  {"python"},
	"version":     nil,
}

// flagEnv is the environment variable each shared flag's default comes
// from.
var flagEnv = map[string]string{
	"data": "NEKRO_DATA_DIR", "database": db.EnvDatabaseURL, "log-level": "NEKRO_LOG_LEVEL",
	"kv-max-value": "NEKRO_KV_MAX_VALUE", "kv-quota": "NEKRO_KV_QUOTA",
	"plugins": "NEKRO_PLUGINS", "plugin-dir": "NEKRO_PLUGIN_DIR", "python-index": "NEKRO_PYTHON_INDEX",
	"plugin-data-quota": "NEKRO_PLUGIN_DATA_QUOTA", "mcp-config": "NEKRO_MCP_CONFIG",
	"python": "NEKRO_PYTHON", "sandbox": "NEKRO_SANDBOX", "docker-image": "NEKRO_DOCKER_IMAGE",
	"call-timeout": "NEKRO_CALL_TIMEOUT", "max-runs": "NEKRO_MAX_RUNS", "sandbox-uids": "NEKRO_SANDBOX_UIDS",
	"sandbox-template": "NEKRO_SANDBOX_TEMPLATE",
	"shared-quota":     "NEKRO_SHARED_QUOTA", "shared-inodes": "NEKRO_SHARED_INODES",
	// Flags of single commands, named here so a bad environment value is
	// reported with its variable, and the config file knows them.
	"listen": "NEKRO_LISTEN", "timer-turns-per-hour": "NEKRO_TIMER_TURNS_PER_HOUR",
	"llm-base-url": llm.EnvBaseURL, "llm-model": llm.EnvModel, "max-iterations": "NEKRO_MAX_ITERATIONS",
	"shutdown-timeout": "NEKRO_SHUTDOWN_TIMEOUT", "zygotes": "NEKRO_ZYGOTES", "command-prefix": "NEKRO_COMMAND_PREFIX",
	"super-users": "NEKRO_SUPER_USERS", "upload-max-file": "NEKRO_UPLOAD_MAX_FILE", "upload-max-message": "NEKRO_UPLOAD_MAX_MESSAGE",
	"config": EnvConfig,
}

// envInUsage finds the variable a flag's usage names, "(env NEKRO_X)":
// how a chat platform's flags (declared by their adapters) say theirs.
var envInUsage = regexp.MustCompile(`\benv (NEKRO_[A-Z0-9_]+)`)

// envOf returns the environment variable of the setting flag f, or "" for
// a flag that is no setting (a command's own option, such as --json).
func envOf(f *pflag.Flag) string {
	if env, ok := flagEnv[f.Name]; ok {
		return env
	}
	if m := envInUsage.FindStringSubmatch(f.Usage); m != nil {
		return m[1]
	}
	return ""
}

// logLevels are --log-level's values.
var logLevels = []string{"debug", "info", "warn", "error"}

// newGlobals returns the shared flags' values before any flag is parsed:
// each its environment variable's value, or its default. A malformed
// environment value is kept in envErrs, not silently replaced by the
// default.
func newGlobals() *globals {
	g := &globals{envErrs: map[string]error{}}
	g.dataDir = envOr("NEKRO_DATA_DIR", "data")
	g.database = os.Getenv(db.EnvDatabaseURL)
	g.logLevel = os.Getenv("NEKRO_LOG_LEVEL") // "": the command's default (defaultLevel)
	g.defaultLevel = slog.LevelWarn
	g.kvValue = g.envInt("kv-max-value", 1<<20)
	g.kvQuota = g.envSize("kv-quota", kv.DefaultQuotaBytes)
	g.plugins = envOr("NEKRO_PLUGINS", "all")
	g.pluginDirs = envList("NEKRO_PLUGIN_DIR")
	g.pythonIndex = os.Getenv("NEKRO_PYTHON_INDEX")
	g.mcpConfig = os.Getenv("NEKRO_MCP_CONFIG")
	g.pluginQuota = g.envSize("plugin-data-quota", runtime.DefaultPluginDataQuota)
	g.python = envOr("NEKRO_PYTHON", "/usr/bin/python3")
	g.sandbox = envOr("NEKRO_SANDBOX", "bwrap")
	g.image = envOr("NEKRO_DOCKER_IMAGE", "nekro-sandbox")
	g.callTimeout = g.envDuration("call-timeout", 0)
	g.maxRuns = int(g.envInt("max-runs", 8))
	g.sandboxUIDs = envOr("NEKRO_SANDBOX_UIDS", uids.DefaultRange.String())
	g.uidRange = uids.DefaultRange
	g.sandboxTemplate = envBool("NEKRO_SANDBOX_TEMPLATE", true)
	g.sharedQuota = g.envSize("shared-quota", runtime.DefaultSharedQuota)
	g.sharedInodes = g.envInt("shared-inodes", int64(runtime.DefaultSharedInodes))
	g.llmBaseURL = os.Getenv(llm.EnvBaseURL)
	g.llmModel = os.Getenv(llm.EnvModel)
	g.configFile = os.Getenv(EnvConfig)
	return g
}

// define adds the shared flag name to fs, bound to its field of g, unless
// fs has it already.
func (g *globals) define(fs *pflag.FlagSet, name string) {
	if fs.Lookup(name) != nil {
		return
	}
	env := " (env " + flagEnv[name] + ")"
	switch name {
	case "data":
		fs.StringVar(&g.dataDir, name, g.dataDir, "data directory"+env)
	case "database":
		fs.Var(databaseURL{&g.database}, name, "database URL, e.g. postgres://..."+env+"; empty means SQLite in the data directory. "+
			"Give a URL with a password in the env variable: a flag shows in ps")
	case "log-level":
		fs.StringVar(&g.logLevel, name, g.logLevel, strings.Join(logLevels, ", ")+"; default info for serve, warn for other commands"+env)
	case "kv-max-value":
		fs.Int64Var(&g.kvValue, name, g.kvValue, "largest KV value in bytes"+env)
	case "kv-quota":
		fs.Var(g.kvQuota, name, "disk each plugin's KV values may take up, e.g. 256MiB, or none"+env)
	case "plugins":
		fs.StringVar(&g.plugins, name, g.plugins, "plugins to enable: all, or a comma-separated list of keys (author.module); nekro.basic is always on"+env)
	case "plugin-dir":
		fs.StringArrayVar(&g.pluginDirs, name, g.pluginDirs,
			"directory of Python plugins (*.py files and packages defining 'plugin'); repeatable (env NEKRO_PLUGIN_DIR, paths joined by :)")
	case "python-index":
		fs.StringVar(&g.pythonIndex, name, g.pythonIndex,
			"where Python plugins' missing packages and the sandbox's pip install come from: a package index URL, or a directory of wheels"+env)
	case "mcp-config":
		fs.StringVar(&g.mcpConfig, name, g.mcpConfig,
			`file of MCP servers, each a plugin mcp.NAME: {"mcpServers": {"NAME": {"command","args","env"} or {"url","headers"}}}`+env)
	case "plugin-data-quota":
		fs.Var(g.pluginQuota, name, "disk each plugin's data directory may take, e.g. 1GiB"+env)
	case "python":
		fs.StringVar(&g.python, name, g.python, "Python interpreter inside the sandbox"+env)
	case "sandbox":
		fs.StringVar(&g.sandbox, name, g.sandbox, "sandbox backend: bwrap or docker"+env)
	case "docker-image":
		fs.StringVar(&g.image, name, g.image, "image of the docker sandbox backend"+env)
	case "call-timeout":
		fs.DurationVar(&g.callTimeout, name, g.callTimeout,
			"how long one sandbox method call may take unless the method sets its own (default 60s; env NEKRO_CALL_TIMEOUT)")
	case "max-runs":
		fs.IntVar(&g.maxRuns, name, g.maxRuns, "sandbox runs at once, across all chats"+env)
	case "sandbox-uids":
		fs.StringVar(&g.sandboxUIDs, name, g.sandboxUIDs,
			"host uids for chats' sandboxes, FIRST-LAST: each chat gets its own, kept in the database (env NEKRO_SANDBOX_UIDS; used when nekro runs as root)")
	case "sandbox-template":
		fs.BoolVar(&g.sandboxTemplate, name, g.sandboxTemplate,
			"bwrap, as root: start new sandboxes as forks of one shared template process instead of a new bwrap each (a few ms of CPU instead of ~30); --sandbox-template=false for a bwrap per sandbox (env NEKRO_SANDBOX_TEMPLATE)")
	case "shared-quota":
		fs.Var(g.sharedQuota, name, "disk each chat's /app/shared and /app/uploads may take together, enforced while the code writes, e.g. 64MiB"+env)
	case "shared-inodes":
		fs.Int64Var(&g.sharedInodes, name, g.sharedInodes, "files and directories each chat's /app/shared and /app/uploads may hold together"+env)
	case "llm-base-url":
		fs.StringVar(&g.llmBaseURL, name, g.llmBaseURL, "OpenAI-compatible API root, e.g. https://api.openai.com/v1"+env)
	case "llm-model":
		fs.StringVar(&g.llmModel, name, g.llmModel, "model name"+env+"; the API key is read from "+llm.EnvAPIKey+" or the config file only")
	default:
		panic("cli: no shared flag " + name)
	}
}

// sharedFlagsAnnotation marks a command that declared its shared flags.
const sharedFlagsAnnotation = "nekro-shared-flags"

// addFlags gives cmd (and its subcommands) the shared flags names.
func (g *globals) addFlags(cmd *cobra.Command, names ...string) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[sharedFlagsAnnotation] = "1"
	for _, n := range names {
		if cmd.Flags().Lookup(n) == nil && (!cmd.HasParent() || cmd.InheritedFlags().Lookup(n) == nil) {
			g.define(cmd.PersistentFlags(), n)
		}
	}
}

// addStoreFlags: --data, --database, --log-level.
func (g *globals) addStoreFlags(cmd *cobra.Command) { g.addFlags(cmd, storeFlagNames...) }

// addKVLimitFlags: --kv-max-value, --kv-quota.
func (g *globals) addKVLimitFlags(cmd *cobra.Command) { g.addFlags(cmd, kvLimitFlagNames...) }

// addPluginFlags: --plugins, --plugin-dir, --python-index, --plugin-data-quota.
func (g *globals) addPluginFlags(cmd *cobra.Command) { g.addFlags(cmd, pluginFlagNames...) }

// addSandboxFlags: --python, --sandbox, --docker-image, --call-timeout,
// --max-runs, --sandbox-uids, --shared-quota, --shared-inodes.
func (g *globals) addSandboxFlags(cmd *cobra.Command) { g.addFlags(cmd, sandboxFlagNames...) }

// addRuntimeFlags: all of the above, what a command opening the whole
// runtime (app.Open) uses.
func (g *globals) addRuntimeFlags(cmd *cobra.Command) { g.addFlags(cmd, runtimeFlagNames...) }

// scopeFlags gives every command below root the shared flags commandFlags
// names for it.
func (g *globals) scopeFlags(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		path := strings.TrimPrefix(c.CommandPath(), root.Name()+" ")
		names, listed := commandFlags[path]
		if !listed && c.Parent() == root && c.Annotations[sharedFlagsAnnotation] == "" {
			names = runtimeFlagNames
		}
		g.addFlags(c, names...)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	for _, c := range root.Commands() {
		walk(c)
	}
}

// flagChecks refuse values the flag cannot mean, for every command that
// offers the flag, whether the value came from the command line or the
// environment. Each returns what the flag accepts.
var flagChecks = []struct {
	name  string
	check func(f *pflag.Flag) error
}{
	{"timeout", func(f *pflag.Flag) error {
		// 0, the default, means the runtime's 60s; given, it must be positive.
		if d, ok := durationOf(f); ok && f.Changed && d <= 0 {
			return fmt.Errorf("must be positive, e.g. 30s")
		}
		return nil
	}},
	{"call-timeout", nonNegativeDuration("e.g. 30s, or 0 for each method's own or 60s")},
	{"shutdown-timeout", nonNegativeDuration("e.g. 30s")},
	{"max-runs", atLeastOne("sandbox runs at once")},
	{"max-iterations", atLeastOne("sandbox runs per turn")},
	{"kv-max-value", atLeastOne("bytes")},
	{"shared-inodes", atLeastOne("files per volume")},
	{"timer-turns-per-hour", func(f *pflag.Flag) error {
		if n, err := strconv.ParseInt(f.Value.String(), 10, 64); err == nil && n < 0 {
			return fmt.Errorf("must be 0 (no limit) or more")
		}
		return nil
	}},
	{"log-level", func(f *pflag.Flag) error {
		if v := f.Value.String(); (v != "" || f.Changed) && !slices.Contains(logLevels, strings.ToLower(v)) {
			return fmt.Errorf("must be one of %s", strings.Join(logLevels, ", "))
		}
		return nil
	}},
	{"sandbox", func(f *pflag.Flag) error {
		if v := f.Value.String(); v != "bwrap" && v != "docker" {
			return fmt.Errorf("must be bwrap or docker")
		}
		return nil
	}},
	{"shared-quota", positiveSize},
	{"upload-max-file", uploadSize},
	{"upload-max-message", uploadSize},
	{"plugin-data-quota", positiveSize},
	{"listen", func(f *pflag.Flag) error {
		host, port, err := net.SplitHostPort(f.Value.String())
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 || strings.ContainsAny(host, " /") {
			return fmt.Errorf("want HOST:PORT, e.g. 127.0.0.1:8021 (port 0 picks a free one)")
		}
		return nil
	}},
}

func durationOf(f *pflag.Flag) (time.Duration, bool) {
	if f.Value.Type() != "duration" {
		return 0, false
	}
	d, err := time.ParseDuration(f.Value.String())
	return d, err == nil
}

func nonNegativeDuration(hint string) func(f *pflag.Flag) error {
	return func(f *pflag.Flag) error {
		if d, ok := durationOf(f); ok && d < 0 {
			return fmt.Errorf("must not be negative, %s", hint)
		}
		return nil
	}
}

func atLeastOne(what string) func(f *pflag.Flag) error {
	return func(f *pflag.Flag) error {
		if n, err := strconv.ParseInt(f.Value.String(), 10, 64); err == nil && n < 1 {
			return fmt.Errorf("must be at least 1 (%s)", what)
		}
		return nil
	}
}

func positiveSize(f *pflag.Flag) error {
	if b, ok := f.Value.(*byteSize); ok && *b <= 0 {
		return fmt.Errorf("must be a size such as 1GiB: it is the size of a filesystem")
	}
	return nil
}

func uploadSize(f *pflag.Flag) error {
	if b, ok := f.Value.(*byteSize); ok && *b <= 0 {
		return fmt.Errorf("must be a size such as 32MiB (uploads are always bounded)")
	}
	return nil
}

// check refuses, before cmd runs, a malformed environment value or a value
// outside what a flag accepts, for the flags cmd offers; it names the flag
// (and the variable, when the value came from there) and what is accepted.
func (g *globals) check(cmd *cobra.Command) error {
	fs := cmd.Flags()
	names := make([]string, 0, len(g.envErrs))
	for n := range g.envErrs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if f := fs.Lookup(n); f != nil && !f.Changed {
			return g.envErrs[n]
		}
	}
	for _, c := range flagChecks {
		f := fs.Lookup(c.name)
		if f == nil {
			continue
		}
		if err := c.check(f); err != nil {
			return fmt.Errorf("%s: %w", g.describeFlag(f), err)
		}
	}
	r, err := uids.ParseRange(g.sandboxUIDs)
	if err != nil {
		if f := fs.Lookup("sandbox-uids"); f != nil {
			return fmt.Errorf("%s: %w", g.describeFlag(f), err)
		}
		r = uids.DefaultRange // not this command's concern
	}
	g.uidRange = r
	return nil
}

// describeFlag names a flag and its value as the operator gave it: on the
// command line, in its environment variable, or in the config file.
func (g *globals) describeFlag(f *pflag.Flag) string {
	if env, ok := flagEnv[f.Name]; ok && !f.Changed {
		if v, set := os.LookupEnv(env); set {
			return fmt.Sprintf("%s=%s (--%s)", env, v, f.Name)
		}
	}
	if at, ok := g.fromFile[f.Name]; ok && !f.Changed {
		return fmt.Sprintf("%s: %s: %s", at, f.Name, f.Value.String())
	}
	return fmt.Sprintf("--%s %s", f.Name, f.Value.String())
}

// envInt reads flag's environment variable as an integer, or def when it
// is unset; a value that is not one is kept as the flag's error.
func (g *globals) envInt(flag string, def int64) int64 {
	env := flagEnv[flag]
	v, ok := os.LookupEnv(env)
	if !ok || v == "" {
		return def
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		g.envErrs[flag] = fmt.Errorf("%s=%q is not a whole number: set a number or unset it (it is the default of --%s)", env, v, flag)
		return def
	}
	return n
}

// envDuration reads flag's environment variable as a duration, or def
// when it is unset; a value that is not one is kept as the flag's error.
func (g *globals) envDuration(flag string, def time.Duration) time.Duration {
	env := flagEnv[flag]
	v, ok := os.LookupEnv(env)
	if !ok || v == "" {
		return def
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		g.envErrs[flag] = fmt.Errorf("%s=%q is not a duration such as 30s or 2m: fix or unset it (it is the default of --%s)", env, v, flag)
		return def
	}
	return d
}

// envSize reads flag's environment variable as a size, or def when it is
// unset; a value that is not one is kept as the flag's error.
func (g *globals) envSize(flag string, def int64) *byteSize {
	env := flagEnv[flag]
	b := byteSize(def)
	if v, ok := os.LookupEnv(env); ok && v != "" {
		n, err := parseByteSize(v)
		if err != nil {
			g.envErrs[flag] = fmt.Errorf("%s: %w: fix or unset it (it is the default of --%s)", env, err, flag)
		} else {
			b = byteSize(n)
		}
	}
	return &b
}
