package cli

import (
	"log/slog"
	"net/url"
	"strings"

	"github.com/spf13/pflag"

	"github.com/nekro-go/nekro/adapter"
	"github.com/nekro-go/nekro/internal/db"
)

// Secret flags are the flags whose value implements adapter.SecretFlag:
// nekro's own (--database when its URL holds a password) and every chat
// platform's declared with adapter.SecretString (--onebot-token). The API
// token and the model's API key have no flag: they are read from the
// environment only.

// warnSecretFlags logs one warning for each secret flag given on the
// command line of this start, naming the flag and the environment
// variable to use instead, never the value: any user of the host sees a
// process's arguments in ps.
func warnSecretFlags(fs *pflag.FlagSet, log *slog.Logger) {
	fs.Visit(func(f *pflag.Flag) {
		s, ok := f.Value.(adapter.SecretFlag)
		if !ok || s.SecretEnv() == "" {
			return
		}
		log.Warn("--"+f.Name+" holds a secret and was given on the command line, where ps shows it to every user of this host: set "+
			s.SecretEnv()+" instead", "flag", "--"+f.Name, "env", s.SecretEnv())
	})
}

// databaseURL is --database: a secret when the URL holds a password.
type databaseURL struct{ p *string }

func (d databaseURL) Set(v string) error {
	*d.p = v
	return nil
}

// String shows the URL with its password masked (in --help's default).
func (d databaseURL) String() string {
	if d.p == nil || *d.p == "" {
		return ""
	}
	if u, err := url.Parse(*d.p); err == nil && u.User != nil {
		return u.Redacted()
	}
	if strings.Contains(*d.p, "password=") {
		return "(a connection string with a password)"
	}
	return *d.p
}

// Type names the value in --help.
func (d databaseURL) Type() string { return "string" }

// SecretEnv is NEKRO_DATABASE_URL when the URL holds a password (in its
// user part, or a password= parameter), else "": a URL without one is no
// secret.
func (d databaseURL) SecretEnv() string {
	if d.p == nil {
		return ""
	}
	if u, err := url.Parse(*d.p); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			return db.EnvDatabaseURL
		}
	}
	if strings.Contains(*d.p, "password=") {
		return db.EnvDatabaseURL
	}
	return ""
}
