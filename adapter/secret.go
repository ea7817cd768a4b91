package adapter

import (
	"flag"
	"os"
)

// SecretFlag is a flag value that holds a secret (a token, a password).
// A secret given on the command line shows in `ps` to every user of the
// host, so nekro logs one warning at start for each SecretFlag given as a
// flag, naming the flag and the environment variable to set instead,
// never the value. Declare a platform's secrets with SecretString, or
// give a flag.Value of your own this method.
type SecretFlag interface {
	flag.Value
	// SecretEnv names the environment variable that holds the secret
	// instead of the flag. "" means the value given holds no secret (a
	// URL without a password, say): no warning.
	SecretEnv() string
}

// SecretString declares on fs the string flag name holding a secret,
// stored in *p. When the flag is not given, *p is env's value. The value
// never shows in --help or in errors (String is empty), and giving it as
// a flag draws the warning SecretFlag describes.
func SecretString(fs *flag.FlagSet, p *string, name, env, usage string) {
	*p = os.Getenv(env)
	fs.Var(&secretString{p: p, env: env}, name, usage+" (env "+env+"; prefer it: a flag shows in ps)")
}

type secretString struct {
	p   *string
	env string
}

func (s *secretString) Set(v string) error {
	*s.p = v
	return nil
}

// String is empty: a secret is not shown as a default or in an error.
func (s *secretString) String() string { return "" }

// Type names the value in --help as a string flag.
func (s *secretString) Type() string { return "string" }

// SecretEnv is the variable to set instead of the flag.
func (s *secretString) SecretEnv() string { return s.env }
