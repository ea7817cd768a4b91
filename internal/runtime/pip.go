package runtime

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/plugin"
)

// pipArgs and pipResult are what the sandbox's pip shim sends and gets
// (internal/sandbox/stub/pip_shim.py).
type pipArgs struct {
	Requirements []string `json:"requirements"`
	Upgrade      bool     `json:"upgrade,omitempty"`
	Uninstall    bool     `json:"uninstall,omitempty"`
}

type pipResult struct {
	Exit   int    `json:"exit"`   // pip's exit status, as the shim exits
	Output string `json:"output"` // pip's output (its tail)
}

// newPipMethod builds the host's side of `pip install` in a run: a method
// of a plugin of its own that is never registered, so it is in no
// listing, prompt, stub or MCP server and the operator cannot turn it
// off by mistake. Runs reach it only by sandbox.PipMethod (runMethods),
// a name no plugin method can have.
func (rt *Runtime) newPipMethod() *pluginhost.MethodInfo {
	p := plugin.New(plugin.Meta{Name: "pip", ModuleName: "pip", Author: "nekro", Version: "1.0.0",
		Description: "pip install in the sandbox, into the chat's package layer"})
	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "pip_install", Timeout: sandbox.PipTimeout,
		Doc: "Installs requirements into the calling chat's package layer from the operator's index.",
	}, rt.pipInstall)
	return pluginhost.Methods(p)[0]
}

// pipInstall installs a run's requirements into its chat's layer. A
// refusal (no index, a backend that cannot, a requirement that is not a
// plain name) is an error; pip's own failure is its output and exit 1.
func (rt *Runtime) pipInstall(ctx *plugin.Ctx, a pipArgs) (pipResult, error) {
	if rt.cfg.PythonIndex == "" && !a.Uninstall {
		return pipResult{}, errors.New(sandbox.ErrNoIndex)
	}
	inst, ok := rt.runner.(sandbox.Installer)
	if !ok {
		return pipResult{}, fmt.Errorf("this sandbox backend cannot install packages (pip install works with --sandbox bwrap)")
	}
	if err := sandbox.CheckRequirements(a.Requirements); err != nil {
		return pipResult{}, err
	}
	chatKey := ctx.ChatKey()
	// Two runs of a chat installing at once would move files into the
	// same layer together: this process takes them one at a time.
	// (Processes sharing a chat's volume do not coordinate installs.)
	mu, _ := rt.pipLocks.LoadOrStore(chatKey, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	shared, err := rt.layout.EnsureSharedDir(chatKey)
	if err != nil {
		return pipResult{}, err
	}
	uid, gid, err := rt.chatUID(ctx, chatKey)
	if err != nil {
		return pipResult{}, err
	}
	if err := rt.trustPackageLayer(chatKey, shared); err != nil {
		return pipResult{}, err
	}
	spec := sandbox.InstallSpec{SharedDir: shared, UID: uid, GID: gid, Index: rt.cfg.PythonIndex,
		Requirements: a.Requirements, Upgrade: a.Upgrade, Uninstall: a.Uninstall, Limits: rt.cfg.Limits}
	out, err := inst.InstallPackages(ctx, spec)
	rt.log.Info("pip in a run", "chat", chatKey, "mode", spec.Mode(), "requirements", a.Requirements, "err", err)
	if err == nil {
		return pipResult{Output: out}, nil
	}
	if out == "" && !errors.Is(err, syscall.ENOSPC) {
		return pipResult{}, err
	}
	if errors.Is(err, syscall.ENOSPC) {
		err = fmt.Errorf("this chat's /app/shared is full: it holds at most %d MiB and %d files (--shared-quota, --shared-inodes), "+
			"installed packages in %s included", rt.cfg.SharedQuota>>20, rt.cfg.SharedInodes, sandbox.PackagesDir)
	}
	if !strings.HasSuffix(out, "\n") && out != "" {
		out += "\n"
	}
	return pipResult{Exit: 1, Output: out + "ERROR: " + err.Error()}, nil
}

// pythonIndex returns --python-index with a directory made absolute.
func pythonIndex(index string) (string, error) {
	if index == "" || sandbox.IndexIsURL(index) {
		return index, nil
	}
	abs, err := filepath.Abs(index)
	if err != nil {
		return "", fmt.Errorf("--python-index: %w", err)
	}
	return abs, nil
}
