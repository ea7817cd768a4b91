package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/nekro-go/nekro/adapter"
	"github.com/nekro-go/nekro/internal/llm"
	"github.com/nekro-go/nekro/internal/uids"
)

// The config file: a YAML mapping whose keys are the long names of the
// setting flags (the flags with an environment variable), read by every
// command. A section stands for the common start of its keys' names:
//
//	onebot:
//	  token: ...      # the same as onebot-token: ...
//
// Some keys have no flag: llm-api-key (NEKRO_LLM_API_KEY), the chat
// model's llm-context-window and llm-max-tokens (NEKRO_LLM_CONTEXT_WINDOW,
// NEKRO_LLM_MAX_TOKENS), and the model groups, llm: {groups: {NAME:
// {base-url, model, api-key, context-window, max-tokens}}}
// (NEKRO_LLM_<NAME>_*). A value on the command line beats its variable,
// which beats the file, which beats the default.

// EnvConfig names the config file, as --config does.
const EnvConfig = "NEKRO_CONFIG"

// DefaultConfigName is the config file read from the data directory when
// neither --config nor NEKRO_CONFIG names one.
const DefaultConfigName = "nekro.yaml"

// fileOnly are the config keys with no flag, and their variables.
var fileOnly = map[string]string{"llm-api-key": llm.EnvAPIKey,
	"llm-context-window": "NEKRO_LLM_CONTEXT_WINDOW", "llm-max-tokens": "NEKRO_LLM_MAX_TOKENS"}

// groupFields are a model group's keys, and their variables' suffixes.
var groupFields = map[string]string{"base-url": "BASE_URL", "model": "MODEL", "api-key": "API_KEY",
	"context-window": "CONTEXT_WINDOW", "max-tokens": "MAX_TOKENS"}

// groupName is a model group's name: its variables are NEKRO_LLM_<NAME>_*.
var groupName = regexp.MustCompile(`^[a-z0-9_]+$`)

// fileSetting is one key of the config file.
type fileSetting struct {
	key    string   // the flag's name: sections joined by "-"
	line   int      // of the value
	values []string // one, or a list's items
	list   bool
	group  string // a model group's name, for llm-groups-NAME-FIELD keys
	field  string // its field
}

// configFileData is a config file, read and checked.
type configFileData struct {
	path     string
	how      string // what named it: --config, NEKRO_CONFIG or the data directory
	settings []*fileSetting
}

// at is "FILE:LINE" for s.
func (c *configFileData) at(s *fileSetting) string { return fmt.Sprintf("%s:%d", c.path, s.line) }

// lookup returns the setting key, or nil.
func (c *configFileData) lookup(key string) *fileSetting {
	if c == nil {
		return nil
	}
	for _, s := range c.settings {
		if s.key == key {
			return s
		}
	}
	return nil
}

// configPath returns the config file to read and what named it; "" when
// there is none. A file named by --config or NEKRO_CONFIG must exist.
func (g *globals) configPath(cmd *cobra.Command) (path, how string, err error) {
	if f := cmd.Flags().Lookup("config"); f != nil && f.Changed {
		path, how = g.configFile, "--config"
	} else if v := os.Getenv(EnvConfig); v != "" {
		path, how = v, EnvConfig
	} else {
		p := filepath.Join(g.dataDir, DefaultConfigName)
		if _, err := os.Stat(p); err != nil {
			return "", "", nil
		}
		return p, "the data directory", nil
	}
	if _, err := os.Stat(path); err != nil {
		return "", "", fmt.Errorf("%s %s: %w", how, path, err)
	}
	return path, how, nil
}

// loadConfig reads the config file, refuses it whole when a key is
// unknown or a value bad (naming the key and its line), and gives its
// values to the setting flags of cmd that neither the command line nor
// the environment set, and to the shared settings cmd does not offer
// (g.config() describes the operator's configuration for every command).
func (g *globals) loadConfig(cmd *cobra.Command) error {
	g.fromFile = map[string]string{}
	path, how, err := g.configPath(cmd)
	if err != nil || path == "" {
		return err
	}
	file, err := readConfigFile(path)
	if err != nil {
		return err
	}
	file.how = how
	catalog := settingFlags()
	for _, s := range file.settings {
		if err := checkFileSetting(catalog, s); err != nil {
			return fmt.Errorf("%s: %w", file.at(s), err)
		}
	}
	g.file = file
	if err := g.applyFile(cmd.Flags(), true); err != nil {
		return err
	}
	if file.holdsSecret(catalog) {
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			g.logger().Warn("the config file holds a secret and other users of this host may read it: chmod 600 it",
				"file", path, "mode", fmt.Sprintf("%04o", fi.Mode().Perm()))
		}
	}
	return nil
}

// applyFile gives the config file's values to the setting flags of fs
// that neither the command line nor the environment set; with shared, also
// to the shared settings fs lacks (through g's fields).
func (g *globals) applyFile(fs *pflag.FlagSet, shared bool) error {
	if g.file == nil {
		return nil
	}
	scratch := pflag.NewFlagSet("config", pflag.ContinueOnError)
	for _, s := range g.file.settings {
		f := fs.Lookup(s.key)
		if f == nil && shared && (slices.Contains(runtimeFlagNames, s.key) || s.key == "llm-base-url" || s.key == "llm-model") {
			g.define(scratch, s.key)
			f = scratch.Lookup(s.key)
		}
		if f == nil || f.Changed {
			continue // another command's setting, or given on the command line
		}
		env := envOf(f)
		if env == "" || os.Getenv(env) != "" {
			continue // a command's own option of that name; or the environment beats the file
		}
		if err := setFileValue(f, s); err != nil {
			return fmt.Errorf("%s: %s: %w", g.file.at(s), s.key, err)
		}
		g.fromFile[s.key] = g.file.at(s)
	}
	return nil
}

// holdsSecret reports whether the file sets a secret: an API key or a
// secret flag's value.
func (c *configFileData) holdsSecret(catalog *pflag.FlagSet) bool {
	for _, s := range c.settings {
		if s.key == "llm-api-key" || s.field == "api-key" {
			return true
		}
		if f := catalog.Lookup(s.key); f != nil && isSecret(f) {
			return true
		}
	}
	return false
}

// readConfigFile parses path into its settings, refusing what is no
// mapping of settings.
func readConfigFile(path string) (*configFileData, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	c := &configFileData{path: path}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return c, nil // empty
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return c, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: want a mapping of settings (key: value), one per line", path, root.Line)
	}
	seen := map[string]int{}
	var walk func(prefix []string, m *yaml.Node) error
	walk = func(prefix []string, m *yaml.Node) error {
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			if v.Kind == yaml.AliasNode {
				v = v.Alias
			}
			if k.Kind != yaml.ScalarNode || k.Value == "" {
				return fmt.Errorf("%s:%d: a key must be a name", path, k.Line)
			}
			parts := append(slices.Clone(prefix), k.Value)
			key := strings.Join(parts, "-")
			s := &fileSetting{key: key, line: v.Line}
			if len(parts) == 4 && parts[0] == "llm" && parts[1] == "groups" {
				s.group, s.field = parts[2], parts[3]
			}
			switch {
			case v.Kind == yaml.MappingNode:
				if err := walk(parts, v); err != nil {
					return err
				}
				continue
			case key == "llm-groups" || (len(parts) == 3 && parts[0] == "llm" && parts[1] == "groups"):
				return fmt.Errorf("%s:%d: %s: want a mapping, e.g. llm: {groups: {vision: {model: NAME, base-url: URL, api-key: KEY}}}", path, v.Line, key)
			case v.Kind == yaml.SequenceNode:
				s.list = true
				for _, item := range v.Content {
					if item.Kind != yaml.ScalarNode {
						return fmt.Errorf("%s:%d: %s: a list of values, not of sections", path, item.Line, key)
					}
					s.values = append(s.values, item.Value)
				}
			case v.Kind == yaml.ScalarNode:
				if v.Tag != "!!null" {
					s.values = []string{v.Value}
				} else {
					s.values = []string{""}
				}
			default:
				return fmt.Errorf("%s:%d: %s: not a value", path, v.Line, key)
			}
			if line, dup := seen[key]; dup {
				return fmt.Errorf("%s:%d: %s is set twice (also on line %d)", path, k.Line, key, line)
			}
			seen[key] = k.Line
			c.settings = append(c.settings, s)
		}
		return nil
	}
	if err := walk(nil, root); err != nil {
		return nil, err
	}
	return c, nil
}

// checkFileSetting refuses a key that is no setting and a value its flag
// does not take, as the flag would on the command line.
func checkFileSetting(catalog *pflag.FlagSet, s *fileSetting) error {
	if s.group != "" {
		if _, ok := groupFields[s.field]; !ok {
			return fmt.Errorf("unknown key %q: a model group has base-url, model, api-key, context-window and max-tokens", s.field)
		}
		if !groupName.MatchString(s.group) {
			return fmt.Errorf("model group %q: a name is lower-case letters, digits and _ (its variables are NEKRO_LLM_<NAME>_*)", s.group)
		}
		return oneValue(s)
	}
	if _, ok := fileOnly[s.key]; ok {
		return oneValue(s)
	}
	f := catalog.Lookup(s.key)
	if f == nil {
		return unknownKey(catalog, s.key)
	}
	if err := setFileValue(f, s); err != nil {
		if want, ok := valueKinds[f.Value.Type()]; ok {
			return fmt.Errorf("%s: %q is not %s", s.key, strings.Join(s.values, ","), want)
		}
		return fmt.Errorf("%s: %w", s.key, err)
	}
	for _, c := range flagChecks {
		if c.name == s.key {
			if err := c.check(f); err != nil {
				return fmt.Errorf("%s: %s: %w", s.key, f.Value.String(), err)
			}
		}
	}
	if s.key == "sandbox-uids" {
		if _, err := uids.ParseRange(s.values[0]); err != nil {
			return fmt.Errorf("%s: %w", s.key, err)
		}
	}
	return nil
}

func oneValue(s *fileSetting) error {
	if s.list {
		return fmt.Errorf("%s takes one value, not a list", s.key)
	}
	return nil
}

// unknownKey says that key is no setting, with the nearest one's name.
func unknownKey(catalog *pflag.FlagSet, key string) error {
	if key == "config" {
		return errors.New(`unknown key "config": a config file cannot name another`)
	}
	best, dist := "", 3
	catalog.VisitAll(func(f *pflag.Flag) {
		if d := editDistance(key, f.Name); d < dist {
			best, dist = f.Name, d
		}
	})
	for k := range fileOnly {
		if d := editDistance(key, k); d < dist {
			best, dist = k, d
		}
	}
	if best != "" {
		return fmt.Errorf("unknown key %q (did you mean %q?)", key, best)
	}
	return fmt.Errorf("unknown key %q: the keys are the long names of nekro serve's flags (nekro config show lists them)", key)
}

// valueKinds say what a flag of a type takes, for a refusal.
var valueKinds = map[string]string{"int": "a whole number", "int64": "a whole number", "float64": "a number such as 0.5",
	"duration": "a duration such as 30s or 2m", "bool": "true or false"}

// setFileValue gives f the setting's value as the command line would: a
// list replaces a list flag's items, or is joined with commas for a flag
// taking a comma-separated list.
func setFileValue(f *pflag.Flag, s *fileSetting) error {
	if sv, ok := f.Value.(pflag.SliceValue); ok && s.list {
		return sv.Replace(s.values)
	}
	if s.list {
		if !strings.Contains(f.Usage, "comma-separated") {
			return errors.New("takes one value, not a list")
		}
		return f.Value.Set(strings.Join(s.values, ","))
	}
	return f.Value.Set(s.values[0])
}

// settingFlags returns every setting flag (every flag with an environment
// variable: the shared ones, nekro serve's, the chat platforms'), bound to
// values of their own: what the config file may set.
func settingFlags() *pflag.FlagSet {
	tg := newGlobals()
	fs := pflag.NewFlagSet("settings", pflag.ContinueOnError)
	for _, n := range runtimeFlagNames {
		tg.define(fs, n)
	}
	newServeCmd(tg).Flags().VisitAll(func(f *pflag.Flag) {
		if envOf(f) != "" && fs.Lookup(f.Name) == nil {
			fs.AddFlag(f)
		}
	})
	return fs
}

// isSecret reports whether f holds a secret (adapter.SecretFlag).
func isSecret(f *pflag.Flag) bool {
	_, ok := f.Value.(adapter.SecretFlag)
	return ok
}

// setting returns the value of a key with no flag: its variable's, else
// the config file's, and where it came from.
func (g *globals) setting(key, env string) (value, from string) {
	if v := os.Getenv(env); v != "" {
		return v, "env " + env
	}
	if s := g.file.lookup(key); s != nil {
		return s.values[0], g.file.at(s)
	}
	return "", "default"
}

// models returns the chat model and the further model groups: flags (for
// serve), then NEKRO_LLM_*, then the config file.
func (g *globals) models() (llm.Config, map[string]llm.Config) {
	key, _ := g.setting("llm-api-key", llm.EnvAPIKey)
	window, _ := g.setting("llm-context-window", fileOnly["llm-context-window"])
	maxTokens, _ := g.setting("llm-max-tokens", fileOnly["llm-max-tokens"])
	chat := llm.Config{BaseURL: g.llmBaseURL, Model: g.llmModel, APIKey: key,
		ContextWindow: llm.TokensVar(window), MaxTokens: llm.TokensVar(maxTokens)}
	vars := map[string]string{}
	if g.file != nil {
		for _, s := range g.file.settings {
			if s.group != "" {
				vars[groupEnvName(s.group, s.field)] = s.values[0]
			}
		}
	}
	for _, kv := range os.Environ() {
		if name, v, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "NEKRO_LLM_") && v != "" {
			vars[name] = v
		}
	}
	return chat, llm.GroupsFrom(chat, vars)
}

// groupEnvName is the variable of a model group's field.
func groupEnvName(group, field string) string {
	return "NEKRO_LLM_" + strings.ToUpper(group) + "_" + groupFields[field]
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
