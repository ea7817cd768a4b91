package cli

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

func init() { subcommands = append(subcommands, newConfigCmd) }

func newConfigCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "The config file: show the effective configuration",
		Long: `nekro reads its settings from flags, environment variables and a config
file, in that order of precedence: a flag beats its variable, which beats
the file, which beats the default. The file is YAML whose keys are the
long flag names (sections allowed: onebot: {token: ...} is onebot-token),
named by --config or NEKRO_CONFIG, else <data>/nekro.yaml when present.`,
	}
	show := &cobra.Command{
		Use:   "show",
		Short: "Print nekro serve's effective configuration and where each value came from, secrets masked",
		Long: `Print every setting of nekro serve as YAML, each with where its value came
from: flag, env VARIABLE, FILE:LINE (the config file) or default. Secrets
(tokens, API keys, a database password) show as (hidden). It takes serve's
flags, so "nekro config show --listen :9000" shows what that serve would
use; a config file with an unknown key or a bad value is refused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.showConfig(cmd.OutOrStdout(), cmd)
		},
	}
	// nekro serve's settings, besides the shared ones scopeFlags adds.
	newServeCmd(g).Flags().VisitAll(func(f *pflag.Flag) {
		if envOf(f) != "" && !slices.Contains(runtimeFlagNames, f.Name) {
			show.Flags().AddFlag(f)
		}
	})
	cmd.AddCommand(show)
	return cmd
}

// showConfig prints the settings cmd's flags hold, and the model groups.
func (g *globals) showConfig(out io.Writer, cmd *cobra.Command) error {
	switch {
	case g.file != nil:
		fmt.Fprintf(out, "# config file %s (named by %s)\n", g.file.path, g.file.how)
	default:
		fmt.Fprintf(out, "# no config file: neither --config nor %s names one, and %s does not exist\n",
			EnvConfig, strings.TrimSuffix(g.dataDir, "/")+"/"+DefaultConfigName)
	}
	type row struct{ key, value, from string } // value as YAML
	var rows []row
	fs := cmd.Flags()
	names := []string{}
	settingFlags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	slices.Sort(names)
	for _, name := range names {
		f := fs.Lookup(name)
		if f == nil {
			continue
		}
		r := row{key: name, from: "default"}
		env := envOf(f)
		switch {
		case f.Changed:
			r.from = "flag --" + name
		case os.Getenv(env) != "":
			r.from = "env " + env
		case g.fromFile[name] != "":
			r.from = g.fromFile[name]
		}
		value := f.Value.String()
		if value == "" && r.from != "default" && !isSecret(f) {
			// A value that cannot print itself (a chat platform's list):
			// as it was given.
			if s := g.file.lookup(name); s != nil && r.from == g.fromFile[name] {
				value = strings.Join(s.values, ",")
			} else if strings.HasPrefix(r.from, "env ") {
				value = os.Getenv(env)
			}
		}
		if isSecret(f) && name != "database" {
			value = ""
			if r.from != "default" {
				value = "(hidden)"
			}
		}
		if name == "log-level" && value == "" {
			value, r.from = "info", "default (serve's; warn for other commands)"
		}
		r.value = yamlScalar(value)
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			items := []string{}
			for _, it := range sv.GetSlice() {
				items = append(items, yamlScalar(it))
			}
			r.value = "[" + strings.Join(items, ", ") + "]"
		}
		rows = append(rows, r)
	}
	if _, from := g.setting("llm-api-key", fileOnly["llm-api-key"]); from != "default" {
		rows = append(rows, row{"llm-api-key", "(hidden)", from})
	} else {
		rows = append(rows, row{"llm-api-key", `""`, from})
	}
	for _, key := range []string{"llm-context-window", "llm-max-tokens"} {
		if v, from := g.setting(key, fileOnly[key]); from != "default" {
			rows = append(rows, row{key, yamlScalar(v), from})
		}
	}
	width := 0
	for _, r := range rows {
		width = max(width, len(r.key)+len(r.value))
	}
	for _, r := range rows {
		fmt.Fprintf(out, "%s: %s%s  # %s\n", r.key, r.value, strings.Repeat(" ", width-len(r.key)-len(r.value)), r.from)
	}
	g.showGroups(out)
	return nil
}

// showGroups prints the model groups as the config file's llm.groups
// section, each field with where it came from.
func (g *globals) showGroups(out io.Writer) {
	_, groups := g.models()
	if len(groups) == 0 {
		fmt.Fprintln(out, "# model groups besides chat: none (llm: {groups: {NAME: {model: ...}}} or NEKRO_LLM_<NAME>_MODEL)")
		return
	}
	names := make([]string, 0, len(groups))
	for n := range groups {
		names = append(names, n)
	}
	slices.Sort(names)
	fmt.Fprintln(out, "llm:\n  groups:")
	for _, n := range names {
		c := groups[n]
		fmt.Fprintf(out, "    %s:\n", n)
		for _, field := range []string{"model", "base-url", "api-key", "context-window", "max-tokens"} {
			value := map[string]string{"model": c.Model, "base-url": c.BaseURL, "api-key": c.APIKey,
				"context-window": tokensValue(c.ContextWindow), "max-tokens": tokensValue(c.MaxTokens)}[field]
			if (field == "context-window" || field == "max-tokens") && value == "" {
				continue // unset: the group's defaults
			}
			from := "default"
			if env := groupEnvName(n, field); os.Getenv(env) != "" {
				from = "env " + env
			} else if s := g.file.lookup("llm-groups-" + n + "-" + field); s != nil {
				from = g.file.at(s)
			} else if field != "model" && value != "" {
				from = "the chat model's"
			}
			if field == "api-key" && value != "" {
				value = "(hidden)"
			}
			fmt.Fprintf(out, "      %s: %s  # %s\n", field, yamlScalar(value), from)
		}
	}
}

// tokensValue shows a count of tokens as set: "" for unset, "invalid"
// for a value that is no whole number (llm.TokensVar).
func tokensValue(n int) string {
	switch {
	case n == 0:
		return ""
	case n < 0:
		return "invalid"
	}
	return strconv.Itoa(n)
}

// yamlScalar is v as a YAML value the config file reads back as v:
// plain when it is, quoted otherwise.
func yamlScalar(v string) string {
	if v == "" {
		return `""`
	}
	var doc yaml.Node
	if yaml.Unmarshal([]byte("k: "+v), &doc) == nil && len(doc.Content) == 1 && len(doc.Content[0].Content) == 2 {
		if n := doc.Content[0].Content[1]; n.Kind == yaml.ScalarNode && n.Tag != "!!null" && n.Value == v {
			return v
		}
	}
	return fmt.Sprintf("%q", v)
}
