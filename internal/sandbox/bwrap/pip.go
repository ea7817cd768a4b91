package bwrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/nekro-go/nekro/internal/sandbox"
)

// indexMount is where a wheel directory appears in the installer's sandbox.
const indexMount = "/nekro-index"

// pipOutputBytes is how much of pip's output an install returns.
const pipOutputBytes = 16 << 10

// InstallPackages runs sandbox.PipInstallScript in a sandbox like a run's
// (the chat's uid, its package layer writable, the system read-only,
// seccomp, a private /tmp) with pip from the sandbox's own python; with
// spec.Uninstall it removes installed distributions instead. A wheel directory
// is mounted read-only and the sandbox has no network; an index URL gives
// it the host's network, and then only pip runs in it: the requirements
// are plain names (sandbox.CheckRequirement), so pip reaches the index and
// the files it links to, nothing the chat names.
func (r *Runner) InstallPackages(ctx context.Context, spec sandbox.InstallSpec) (string, error) {
	if err := sandbox.CheckRequirements(spec.Requirements); err != nil {
		return "", err
	}
	if spec.Index == "" && !spec.Uninstall {
		return "", errors.New(sandbox.ErrNoIndex)
	}
	bw, err := r.bwrapPath()
	if err != nil {
		return "", err
	}
	uid, gid := spec.UID, spec.GID
	if uid < 0 {
		uid, gid = r.SandboxUID()
	}
	layer, err := sandbox.EnsurePackagesDir(spec.SharedDir, uid, gid)
	if err != nil {
		return "", err
	}
	l := spec.Limits.WithDefaults()
	a := systemArgs(l)
	// The layer alone, writable: the installer is the one writer of the
	// layer, and never sees the rest of /app/shared, which the chat's
	// code writes.
	a = append(a, "--dir", "/app", "--dir", "/app/shared", "--bind", layer, sandbox.PackagesDir)
	index := spec.Index
	if spec.Uninstall {
		index = "-"
	} else if !sandbox.IndexIsURL(index) {
		if st, err := os.Stat(index); err != nil || !st.IsDir() {
			return "", fmt.Errorf("the package index %s is not a directory of wheels the sandbox can read (--python-index): %v", index, err)
		} else if uid, _ := r.SandboxUID(); uid >= 0 {
			// The installer runs as the chat's uid, which must reach it.
			if err := readableByOthers(index, st); err != nil {
				return "", err
			}
		}
		a = append(a, "--ro-bind", index, indexMount)
		index = indexMount
	}
	var extra []*os.File
	if len(r.Seccomp) > 0 {
		f, err := memFile("nekro-seccomp", r.Seccomp)
		if err != nil {
			return "", err
		}
		defer f.Close()
		extra = append(extra, f)
		a = append(a, "--seccomp", "3")
	}
	a = append(a, "--chdir", "/tmp", "--cap-drop", "ALL", "--remount-ro", "/")
	if sandbox.IndexIsURL(index) {
		a = shareNet(a)
	}
	a = append(a, r.Python, "-I", "-B", "-c", sandbox.PipInstallScript(), sandbox.PackagesDir, index, spec.Mode(),
		strconv.FormatInt(l.MemoryBytes, 10), strconv.FormatInt(l.FileBytes, 10), strconv.Itoa(l.Processes))
	a = append(a, spec.Requirements...)
	ctx, cancel := context.WithTimeout(ctx, sandbox.PipTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bw, a...)
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = r.sysProcAttr(spec.UID, spec.GID)
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = bwrapEnv
	cmd.Dir = "/"
	out := sandbox.NewCappedBuffer(pipOutputBytes)
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	if err == nil {
		return out.String(), nil
	}
	if ctx.Err() != nil {
		return out.String(), fmt.Errorf("pip install did not finish in time (%w)", ctx.Err())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 28 {
		return out.String(), fmt.Errorf("pip install: %w", syscall.ENOSPC)
	}
	return out.String(), fmt.Errorf("pip install failed: %w", err)
}

var _ sandbox.Installer = (*Runner)(nil)

// readableByOthers checks that sandboxes, which run as other uids, can
// list dir (st) and reach it through its parents.
func readableByOthers(dir string, st os.FileInfo) error {
	if st.Mode().Perm()&0o005 != 0o005 {
		return fmt.Errorf("the package index %s (--python-index) is not readable by sandboxes (they run as other uids): run `chmod o+rx %s`", dir, dir)
	}
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		pst, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("the package index (--python-index): %w", err)
		}
		if pst.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("the package index %s (--python-index) is not reachable by sandboxes (they run as other uids): "+
				"run `chmod o+x %s`", dir, d)
		}
		if d == "/" {
			return nil
		}
	}
}
