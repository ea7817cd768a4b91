package pyplugin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A plugin's own environment.
//
// Every plugin has a directory of its own under data/python/envs/
// (envDir): a Python virtual environment made over the system's packages
// (--system-site-packages), so that what the plugin installs comes first
// on its sys.path and never reaches the system or another plugin; two
// plugins may need two versions of one package. It is made when the
// plugin declares requirements (requirementFiles) or when
// dynamic_import_pkg first installs something, and the plugin's process
// then runs the environment's interpreter.
//
// Declared requirements are installed before the process starts
// (nekro_agent._deps) and recorded (envRecordName): a later start with
// the same requirement files reuses the environment; changed files make
// it anew.

// envRecordName is the file in an environment saying which requirement
// files it was made for.
const envRecordName = "nekro-env.json"

// DefaultInstallTimeout bounds the installation of one plugin's
// requirements.
const DefaultInstallTimeout = 10 * time.Minute

// envRecord is what envRecordName holds.
type envRecord struct {
	// Hash is requirementsHash of the files the environment was made
	// for: "" when it was made by dynamic_import_pkg alone.
	Hash         string            `json:"hash"`
	Requirements []string          `json:"requirements"`
	Installed    map[string]string `json:"installed"`
}

// EnvDir is where the plugin at path (a .py file or a package
// directory) keeps its own packages, under cacheDir (data/python): one
// directory per plugin, named by its file name and a hash of its path.
func EnvDir(cacheDir, path string) string {
	sum := sha256.Sum256([]byte(path))
	name := strings.TrimSuffix(filepath.Base(path), ".py")
	return filepath.Join(cacheDir, "envs", name+"-"+hex.EncodeToString(sum[:4]))
}

// requirementFiles are the files the plugin at path declares its
// requirements in, those that exist: requirements.txt and pyproject.toml
// in a package directory, NAME.requirements.txt beside a single-file
// plugin NAME.py (nekro_agent._deps reads them the same way).
func requirementFiles(path string) []string {
	var cands []string
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		cands = []string{filepath.Join(path, "requirements.txt"), filepath.Join(path, "pyproject.toml")}
	} else {
		cands = []string{strings.TrimSuffix(path, ".py") + ".requirements.txt"}
	}
	var out []string
	for _, c := range cands {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() {
			out = append(out, c)
		}
	}
	return out
}

// requirementsHash names the content of files and the interpreter an
// environment is made with ("" when there are no files).
func requirementsHash(python string, files []string) (string, error) {
	if len(files) == 0 {
		return "", nil
	}
	sum := sha256.New()
	fmt.Fprintf(sum, "python %s\n", python)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(sum, "%s %d\n", filepath.Base(f), len(b))
		sum.Write(b)
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

// prepareEnv installs the plugin's declared requirements into its
// environment when they changed since the last installation, and
// returns the interpreter to run the plugin with: the environment's when
// there is one, else h.python. A requirement that cannot be installed
// (missing from the index, conflicting with another) is a *LoadError
// naming the package.
func (h *host) prepareEnv(ctx context.Context) (string, error) {
	if err := os.MkdirAll(filepath.Dir(h.envDir), 0o755); err != nil {
		return "", fmt.Errorf("plugin packages: %w", err)
	}
	// nekro plugins install and a running nekro serve may prepare the
	// same plugin at once: one at a time.
	lock, err := os.OpenFile(h.envDir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("plugin packages: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", fmt.Errorf("plugin packages: %w", err)
	}
	files := requirementFiles(h.path)
	want, err := requirementsHash(h.python, files)
	if err != nil {
		return "", fmt.Errorf("%s: requirements: %w", h.path, err)
	}
	venvPython := filepath.Join(h.envDir, "bin", "python")
	var rec envRecord
	if b, err := os.ReadFile(filepath.Join(h.envDir, envRecordName)); err == nil {
		json.Unmarshal(b, &rec)
	}
	_, statErr := os.Stat(filepath.Join(h.envDir, "pyvenv.cfg"))
	isVenv := statErr == nil
	if !isVenv && dirExists(h.envDir) {
		// An environment of an earlier nekro (pip --target, no venv):
		// its packages are installed again when asked for.
		if err := os.RemoveAll(h.envDir); err != nil {
			return "", fmt.Errorf("plugin packages: %w", err)
		}
	}
	switch {
	case want == "" && rec.Hash != "":
		// The requirement files are gone: so are their packages.
		if err := os.RemoveAll(h.envDir); err != nil {
			return "", fmt.Errorf("plugin packages: %w", err)
		}
		return h.python, nil
	case want == "" && isVenv:
		return venvPython, nil // dynamic_import_pkg's installs
	case want == "":
		return h.python, nil
	case want == rec.Hash && isVenv:
		return venvPython, nil
	}
	h.log.Info("installing the plugin's requirements into its own environment", "env", h.envDir, "files", files)
	rec, err = h.installRequirements(ctx)
	if err != nil {
		return "", err
	}
	rec.Hash = want
	b, _ := json.MarshalIndent(rec, "", "  ")
	if err := os.WriteFile(filepath.Join(h.envDir, envRecordName), b, 0o644); err != nil {
		return "", fmt.Errorf("plugin packages: %w", err)
	}
	h.log.Info("plugin's requirements installed", "requirements", rec.Requirements, "installed", rec.Installed)
	return venvPython, nil
}

// installRequirements runs nekro_agent._deps: the environment made anew
// and the requirements installed into it.
func (h *host) installRequirements(ctx context.Context) (envRecord, error) {
	timeout := h.installTimeout
	if timeout <= 0 {
		timeout = DefaultInstallTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.python, "-B", "-m", "nekro_agent._deps", h.path, h.envDir, h.index, h.python)
	cmd.Env = pluginEnv(h.pkgDir)
	cmd.Dir = filepath.Dir(h.path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var out struct {
		envRecord
		Error   string `json:"error"`
		Package string `json:"package"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &out); err != nil {
		if ctx.Err() != nil {
			return envRecord{}, &LoadError{Path: h.path, Type: "RequirementError",
				Message: fmt.Sprintf("RequirementError: installing the plugin's requirements took more than %s", timeout)}
		}
		return envRecord{}, fmt.Errorf("%s: installing the plugin's requirements failed: %v: %s", h.path, runErr,
			strings.TrimSpace(lastBytes(stderr.String(), 1500)))
	}
	if out.Error != "" {
		return envRecord{}, &LoadError{Path: h.path, Type: "RequirementError", Message: "RequirementError: " + out.Error}
	}
	return out.envRecord, nil
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func lastBytes(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// RemoveEnv deletes the environment of the plugin at path under
// cacheDir (its packages, its record and its lock): the plugin was
// removed.
func RemoveEnv(cacheDir, path string) error {
	dir := EnvDir(cacheDir, path)
	err := os.RemoveAll(dir)
	if rerr := os.Remove(dir + ".lock"); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
		err = rerr
	}
	return err
}
