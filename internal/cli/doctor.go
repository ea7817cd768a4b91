package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/sandbox"
)

func init() { subcommands = append(subcommands, newDoctorCmd) }

func newDoctorCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check that this machine can run nekro: sandbox, interpreter, data directory, chat platforms, models",
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			ctx := cmd.Context()
			if version, err := checkPython(ctx, g.python, g.sandbox); err != nil {
				return err
			} else if version != "" {
				fmt.Fprintf(out, "ok   python %s (Python %s)\n", g.python, version)
			}
			a, err := app.Open(ctx, g.config())
			if err != nil {
				return fmt.Errorf("data directory and plugins: %w", err)
			}
			defer a.Close(ctx)
			rt := a.Runtime
			fmt.Fprintf(out, "ok   data directory %s\n", rt.Layout().Root)
			if err := rt.Runner().Check(ctx); err != nil {
				return fmt.Errorf("sandbox: %w", err)
			}
			fmt.Fprintln(out, "ok   sandbox backend starts")
			fmt.Fprintln(out, "ok   inherited descriptors: everything above stderr is closed on exec at start, sandboxes get only their own")
			for _, p := range rt.Protections() {
				state := "ok  "
				if !p.Active {
					state = "warn"
				}
				fmt.Fprintf(out, "%s %s: %s\n", state, p.Name, p.Detail)
			}
			if q := g.kvQuotaBytes(); q < 0 {
				fmt.Fprintln(out, "warn KV quota: none (--kv-quota none): a plugin can grow the database without bound")
			} else {
				fmt.Fprintf(out, "ok   KV quota: %s per plugin (--kv-quota)\n", (*byteSize)(&q))
			}
			res, err := a.Host.Exec(ctx, runtime.ExecRequest{ChatKey: "__doctor__", Limits: sandbox.Limits{Timeout: 20 * time.Second},
				Code: `import socket
try:
    socket.create_connection(("1.1.1.1", 53), timeout=1)
    print("network: reachable")
except OSError:
    print("network: none")
print("python ok")`})
			if err != nil {
				return fmt.Errorf("sandboxed run: %w", err)
			}
			if res.StopType != sandbox.Normal || !strings.Contains(res.Output, "python ok") {
				return fmt.Errorf("sandboxed run ended %s:\n%s", res.StopType, res.Output)
			}
			fmt.Fprintf(out, "ok   sandboxed python runs (%d ms); %s", res.DurationMS, strings.SplitN(res.Output, "\n", 2)[0]+"\n")
			for key, reason := range a.Host.Registry().Disabled() {
				fmt.Fprintf(out, "warn plugin %s disabled: %s\n", key, reason)
			}
			fmt.Fprintf(out, "ok   %d plugins enabled, %d sandbox methods\n", len(a.Host.Registry().Plugins()), len(a.Host.Registry().Methods()))
			if err := g.doctorPlatforms(ctx, out); err != nil { // platforms.go
				return err
			}
			return g.doctorModels(ctx, out, a.Models) // doctor_models.go
		},
	}
}

// pythonHint ends every refusal of --python.
const pythonHint = "set --python or NEKRO_PYTHON to a python3 (nekro doctor checks this)"

// checkPythonPath is the quick part of checkPython: the interpreter exists
// where the sandbox looks for it. The sandbox (bwrap) sees the host's /usr,
// with /bin, /sbin, /lib and /lib64 as links into it; the docker backend's
// interpreter is the image's, checked by running it.
func checkPythonPath(python, backend string) error {
	if backend == "docker" {
		return nil
	}
	if !filepath.IsAbs(python) {
		return fmt.Errorf("--python %s: not an absolute path; %s", python, pythonHint)
	}
	resolved, err := filepath.EvalSymlinks(python)
	if err != nil {
		return fmt.Errorf("--python %s: no such file inside the sandbox; %s", python, pythonHint)
	}
	if fi, err := os.Stat(resolved); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("--python %s: not an executable file; %s", python, pythonHint)
	}
	for _, p := range []string{python, resolved} {
		if !underSandboxUsr(p) {
			return fmt.Errorf("--python %s: outside /usr, the only programs the sandbox sees (as /usr, /bin, /sbin, /lib); %s", python, pythonHint)
		}
	}
	return nil
}

// underSandboxUsr reports whether the sandbox sees the host path p at the
// same place.
func underSandboxUsr(p string) bool {
	for _, dir := range []string{"/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/"} {
		if strings.HasPrefix(p, dir) {
			return true
		}
	}
	return false
}

// checkPython checks --python before any sandbox starts, as nekro doctor
// does: checkPythonPath, then the file runs as a Python 3 (on the host; the
// sandbox runs the same file). It returns the version.
func checkPython(ctx context.Context, python, backend string) (string, error) {
	if err := checkPythonPath(python, backend); err != nil || backend == "docker" {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-I", "-S", "-c",
		"import sys; print('%d.%d.%d' % sys.version_info[:3]); sys.exit(sys.version_info[0] != 3)")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	version := strings.TrimSpace(string(out))
	if err == nil && !strings.HasPrefix(version, "3.") {
		err = errors.New("it did not print a Python 3 version")
	}
	if err != nil {
		msg := version
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		return "", fmt.Errorf("--python %s: not a Python 3 (%v: %s); %s", python, err, msg, pythonHint)
	}
	return version, nil
}
