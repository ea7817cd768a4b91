package cli

import (
	"fmt"
	goruntime "runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/server"
)

// Set at link time by the Makefile (make build):
//
//	-ldflags "-X github.com/nekro-go/nekro/internal/cli.version=$(git describe --always --dirty)
//	          -X github.com/nekro-go/nekro/internal/cli.commit=$(git rev-parse HEAD)
//	          -X github.com/nekro-go/nekro/internal/cli.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
//
// A plain go build leaves them empty: the version then comes from the
// module (a go install of a tagged version) or is "dev", and the commit
// from what the go tool embeds of the checkout (vcs.revision; not in a
// git worktree, nor with -buildvcs=false).
var (
	version   string
	commit    string
	buildDate string
)

func init() { subcommands = append(subcommands, newVersionCmd) }

// buildVersion is what `nekro version` prints.
type buildVersion struct {
	Version    string
	Commit     string // "" when the build embedded none
	CommitTime string
	Modified   bool // the checkout had uncommitted changes
	BuildDate  string
	Go         string
	Platform   string
}

// readVersion collects the version from the link-time variables and the
// build information the go tool embeds.
func readVersion() buildVersion {
	v := buildVersion{Version: version, Commit: commit, BuildDate: buildDate, Go: goruntime.Version(),
		Platform: goruntime.GOOS + "/" + goruntime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if v.Commit == "" {
					v.Commit = s.Value
				}
			case "vcs.time":
				v.CommitTime = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if v.Version == "" {
		v.Version = "dev"
	}
	return v
}

// versionLine is --version's one line: "nekro VERSION (commit C, built D, GO)".
func versionLine(v buildVersion) string {
	parts := []string{}
	if v.Commit != "" {
		c := "commit " + v.Commit
		if v.Modified {
			c += "-dirty"
		}
		parts = append(parts, c)
	}
	if v.BuildDate != "" {
		parts = append(parts, "built "+v.BuildDate)
	}
	parts = append(parts, v.Go+" "+v.Platform)
	return v.Version + " (" + strings.Join(parts, ", ") + ")"
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:         "version",
		Short:       "Print the version, commit, build date and Go version of this binary",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{noConfigAnnotation: "1"},
		RunE: func(cmd *cobra.Command, args []string) error {
			v := readVersion()
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "nekro %s\n", v.Version)
			c := v.Commit
			if c == "" {
				c = "unknown (make build records it; a plain go build only in a git checkout with -buildvcs)"
			} else {
				if v.Modified {
					c += " (with uncommitted changes)"
				}
				if v.CommitTime != "" {
					c += ", committed " + v.CommitTime
				}
			}
			fmt.Fprintf(out, "commit  %s\n", c)
			if v.BuildDate != "" {
				fmt.Fprintf(out, "built   %s\n", v.BuildDate)
			}
			fmt.Fprintf(out, "go      %s %s\n", v.Go, v.Platform)
			return nil
		},
	}
}

// serverBuild is v as the status API shows it.
func serverBuild(v buildVersion) server.Build {
	c := v.Commit
	if c != "" && v.Modified {
		c += "-dirty"
	}
	return server.Build{Version: v.Version, Commit: c, BuildDate: v.BuildDate, Go: v.Go + " " + v.Platform}
}
