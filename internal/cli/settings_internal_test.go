package cli

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	_ "github.com/nekro-go/nekro/adapters/all" // the chat platforms' settings
)

// Every setting has an environment variable, named in its --help, and so
// a config file key: every flag of nekro serve (the command with all the
// settings) and every shared flag.
func TestEverySettingHasAnEnvironmentVariable(t *testing.T) {
	root := NewRoot()
	serve, _, err := root.Find([]string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	check := func(f *pflag.Flag) {
		seen[f.Name] = true
		if f.Name == "help" || f.Name == "config" {
			return
		}
		env := envOf(f)
		if env == "" {
			t.Errorf("--%s has no environment variable", f.Name)
			return
		}
		if !strings.Contains(f.Usage, env) {
			t.Errorf("--%s: its help does not name %s: %q", f.Name, env, f.Usage)
		}
		if want := "NEKRO_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_")); env != want &&
			f.Name != "data" && f.Name != "database" { // NEKRO_DATA_DIR, NEKRO_DATABASE_URL predate the rule
			t.Errorf("--%s: variable %s, want %s", f.Name, env, want)
		}
	}
	serve.Flags().VisitAll(check)
	serve.InheritedFlags().VisitAll(check)
	serve.PersistentFlags().VisitAll(check)
	for _, n := range []string{"max-runs", "data", "listen", "onebot-token", "shutdown-timeout", "llm-model"} {
		if !seen[n] {
			t.Errorf("serve has no --%s", n)
		}
	}
	catalog := settingFlags()
	serve.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" && f.Name != "config" && catalog.Lookup(f.Name) == nil {
			t.Errorf("--%s is no config file key", f.Name)
		}
	})
}
