package adapter

import (
	"flag"
	"os"
	"strings"
)

// ListFlag declares on fs the comma-separated list flag name, stored in
// *p: allow lists of chats, guilds or platforms, bot names. When the flag
// is not given, *p is env's list. Blank items are dropped.
func ListFlag(fs *flag.FlagSet, p *[]string, name, env, usage string) {
	*p = splitList(os.Getenv(env))
	fs.Func(name, usage+" (env "+env+")", func(v string) error {
		*p = splitList(v)
		return nil
	})
}

func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
