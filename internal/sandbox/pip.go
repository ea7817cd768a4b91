package sandbox

import (
	"context"
	_ "embed"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// A chat's package layer: `pip install` inside a run installs into the
// chat's own /app/shared/.packages (on the chat's shared volume, so it
// counts against --shared-quota), which every run of that chat has at the
// end of sys.path: the sandbox's own packages come first, a chat can add
// packages but never replace what the system (and a zygote's preloads)
// provide. Nothing another chat reads is ever written. Runs see the layer
// read-only: only the installer writes it (see EnsurePackagesDir), so no
// user's code becomes another user's import.
//
// The sandbox has no network: its pip shim (stub.PipShim) asks the host,
// over the run's RPC socket, with the built-in method PipMethod. The host
// installs binary wheels only (no setup.py runs) from the operator's index
// (--python-index: an index URL or a directory of wheels), in a sandbox of
// its own as the chat's uid (Installer).
const (
	// PackagesDir is the chat's package layer as its sandbox sees it.
	PackagesDir = "/app/shared/.packages"
	// PackagesDirName is the layer's name inside the chat's shared dir.
	PackagesDirName = ".packages"
	// PipMethod is the RPC name of the host's installer. It starts with
	// "_", which no plugin method name may, so no plugin can mount it or
	// shadow it, and it is in no prompt, stub or MCP listing.
	PipMethod = "_nekro_pip"
	// MaxRequirements bounds the requirements of one install.
	MaxRequirements = 32
	// PipTimeout bounds one install; the run's own time limit also does.
	PipTimeout = 10 * time.Minute
)

// RunPath and RunPythonPath are the PATH and PYTHONPATH of a run, which
// put nekro's pip (stub.PipShim, in /app/.nekro) ahead of the system's.
const (
	RunPath       = "/app/.nekro/bin:/usr/local/bin:/usr/bin:/bin"
	RunPythonPath = "/app/.nekro/py"
)

// ErrNoIndex is the install's answer when the operator set no index.
const ErrNoIndex = "packages come from the operator's index: set --python-index or NEKRO_PYTHON_INDEX " +
	"to an index URL or a wheel directory (this nekro has none, so pip install cannot install anything)"

// InstallSpec is one `pip install` for a chat.
type InstallSpec struct {
	// SharedDir is the chat's shared directory (host path); the layer is
	// its PackagesDirName.
	SharedDir string
	// UID and GID the installer runs as: the chat's own (-1: the
	// backend's default).
	UID, GID int
	// Index is an http(s) URL of a package index or an absolute host
	// directory of wheels.
	Index string
	// Requirements are checked with CheckRequirement.
	Requirements []string
	// Upgrade replaces what the layer already has (pip's --upgrade).
	Upgrade bool
	// Uninstall removes the named distributions from the layer instead
	// (pip uninstall); it needs no index.
	Uninstall bool
	// Limits: memory, file size, processes and /tmp of the installer
	// (the time limit is the caller's context).
	Limits Limits
}

// Mode is PipInstallScript's MODE argument for the spec.
func (s InstallSpec) Mode() string {
	switch {
	case s.Uninstall:
		return "uninstall"
	case s.Upgrade:
		return "upgrade"
	}
	return "install"
}

// Installer is implemented by backends that can install packages into a
// chat's layer. The output is pip's, cut to its tail; an error means the
// install did not complete.
type Installer interface {
	InstallPackages(ctx context.Context, spec InstallSpec) (output string, err error)
}

// requirement is a PEP 508 name with optional extras and version
// specifiers, and nothing else: no URL, path, option, marker or "@".
var requirement = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,99}[A-Za-z0-9])?` +
	`(\[[A-Za-z0-9._-]+(,[A-Za-z0-9._-]+)*\])?` +
	`(\s*(===|==|!=|~=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]{1,64}(\s*,\s*(===|==|!=|~=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]{1,64})*)?$`)

// CheckRequirement refuses anything but a package name with optional
// extras and version specifiers (e.g. "requests", "pandas[excel]>=2,<3"):
// a URL, a path, an option or an environment marker would make pip fetch
// or run something the operator did not choose.
func CheckRequirement(r string) error {
	if len(r) > 256 || !requirement.MatchString(r) {
		return fmt.Errorf("%.80q is not a package requirement nekro installs: give a name with optional extras and versions, "+
			"e.g. requests or pandas>=2 (no URLs, paths, options or markers)", r)
	}
	return nil
}

// CheckRequirements checks a whole install's requirements.
func CheckRequirements(rs []string) error {
	if len(rs) == 0 {
		return fmt.Errorf("no package named: pip install NAME [NAME...]")
	}
	if len(rs) > MaxRequirements {
		return fmt.Errorf("%d packages in one install, at most %d", len(rs), MaxRequirements)
	}
	for _, r := range rs {
		if err := CheckRequirement(r); err != nil {
			return err
		}
	}
	return nil
}

// PipSentence is the prompt's line on installing packages, for a runtime
// that can (an index is set and the backend is an Installer) or cannot.
func PipSentence(available bool) string {
	if !available {
		return "pip install is not available (the operator configured no package index)."
	}
	return "Other packages can be installed: `pip install NAME` (in code: subprocess.run(['pip', 'install', 'NAME'], check=True)) " +
		"installs binary wheels from the operator's package index into this chat's own " + PackagesDir +
		", which this chat's later runs import from too (installed packages add to, never replace, the ones above)."
}

// IndexIsURL reports whether index is a package index URL (otherwise a
// directory of wheels).
func IndexIsURL(index string) bool {
	return strings.HasPrefix(index, "http://") || strings.HasPrefix(index, "https://")
}

//go:embed pip_install.py
var pipInstallPy string

// PipInstallScript is the trusted driver an Installer runs with the
// sandbox's python (-I): argv is LAYER INDEX MODE MEMORY FILE PROCESSES
// REQUIREMENT..., where INDEX is a URL or the directory the wheels are
// mounted at ("-" to uninstall) and MODE is InstallSpec.Mode. It runs pip
// (binary wheels only) into a staging prefix in /tmp and moves the result
// into the layer, or removes the named distributions' files from it.
func PipInstallScript() string { return pipInstallPy }
