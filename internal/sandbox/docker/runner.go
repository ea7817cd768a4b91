// Package docker runs sandboxed Python in Docker containers: the production
// option when runs must be isolated by a container runtime, or move to
// other hosts later. It drives the docker CLI, so it needs no client
// library and works with any engine the CLI reaches (DOCKER_HOST).
//
// Each run is `docker run --rm -i` of the configured image with no network,
// a read-only root, a tmpfs /tmp, the chat's own uid (Spec.UID; 65534
// when nekro has no root to give chats uids of their own), no
// capabilities, no-new-privileges, and pids, memory and CPU limits from the cgroup. The
// run directory, the chat's uploads and the sandbox's shared directory are
// bind-mounted as with bubblewrap, so the engine must run on the same host
// as nekro (or see the data directory at the same path). The image needs
// /usr/bin/python3 (or Runner.Python) and an /app directory; see
// sandbox/Dockerfile.
package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/internal/sandbox/seccomp"
)

// Runner is the Docker backend of sandbox.Runner.
type Runner struct {
	Docker string // docker CLI; "docker" on PATH when empty
	Host   string // DOCKER_HOST for the CLI; the environment's when empty
	Image  string // sandbox image; default "nekro-sandbox"
	Python string // interpreter in the image; default /usr/bin/python3
	// ExtraArgs are added to `docker run` before the image (e.g. extra
	// read-only mounts or a --runtime such as runsc).
	ExtraArgs []string
	// UID and GID the container runs as unless the run names its chat's
	// own (Spec.UID). Default 65534.
	UID, GID int
	// SeccompProfile is the path of a Docker seccomp profile (see
	// seccomp.DockerProfile) every container runs under; empty keeps the
	// engine's default profile.
	SeccompProfile string
}

// New returns a runner for image with defaults filled in.
func New(image string) *Runner {
	if image == "" {
		image = "nekro-sandbox"
	}
	return &Runner{Docker: "docker", Image: image, Python: "/usr/bin/python3", UID: 65534, GID: 65534}
}

var (
	_ sandbox.Runner    = (*Runner)(nil)
	_ sandbox.Owner     = (*Runner)(nil)
	_ sandbox.Protector = (*Runner)(nil)
)

// Protections reports the defences of this backend.
func (r *Runner) Protections() []sandbox.Protection {
	seccompOn := r.SeccompProfile != ""
	detail := "nekro's profile: " + strings.Join(seccomp.Denied(), "; ")
	if !seccompOn {
		detail = "the engine's default profile only"
	}
	return []sandbox.Protection{
		{Name: "clean sandbox environment", Active: true, Detail: "containers get only HOME, LANG, MPLCONFIGDIR and MPLBACKEND"},
		{Name: "RPC by descriptor", Active: false,
			Detail: "containers reach the host through a socket in the run's directory, owned by the chat's uid (mode 0600 in a 0700 directory)"},
		{Name: "seccomp filter", Active: seccompOn, Detail: detail},
		{Name: "per-run cgroups", Active: true, Detail: "docker --memory and --pids-limit"},
	}
}

// SandboxUID returns the uid the container runs as.
func (r *Runner) SandboxUID() (uid, gid int) { return r.UID, r.GID }

func (r *Runner) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, r.Docker, args...)
	if r.Host != "" {
		cmd.Env = append(os.Environ(), "DOCKER_HOST="+r.Host)
	}
	return cmd
}

// Check verifies that the engine answers and the image runs Python.
func (r *Runner) Check(ctx context.Context) error {
	if _, err := exec.LookPath(r.Docker); err != nil {
		return fmt.Errorf("docker CLI %q not found: install docker.io (the engine must run too)", r.Docker)
	}
	if out, err := r.command(ctx, "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		return fmt.Errorf("docker engine unreachable: %v: %s (is dockerd running? DOCKER_HOST?)", err, strings.TrimSpace(string(out)))
	}
	args := append([]string{"run", "--rm", "--network", "none"}, r.ExtraArgs...)
	args = append(args, r.Image, r.Python, "-c", "pass")
	if out, err := r.command(ctx, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("image %s cannot run %s: %v: %s (build it from sandbox/Dockerfile)", r.Image, r.Python, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Probe runs a trusted script with the image's python in a container
// without network or the data directory, and returns its stdout.
func (r *Runner) Probe(ctx context.Context, script string) ([]byte, error) {
	args := append([]string{"run", "--rm", "--network", "none", "--env", "MPLBACKEND=Agg"}, r.ExtraArgs...)
	args = append(args, r.Image, r.Python, "-I", "-B", "-c", script)
	var stderr strings.Builder
	cmd := r.command(ctx, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("probe image %s: %w: %s", r.Image, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

var _ sandbox.Prober = (*Runner)(nil)

// Args returns the `docker run` arguments for spec and container name.
func (r *Runner) Args(spec sandbox.Spec, name string) []string {
	l := spec.Limits.WithDefaults()
	uid, gid := spec.UID, spec.GID
	if uid < 0 {
		uid, gid = r.UID, r.GID
	}
	a := []string{"run", "--rm", "-i", "--name", name,
		"--label", "nekro.sandbox=1", "--label", "nekro.host=" + hostLabel(),
		"--read-only",
		"--tmpfs", fmt.Sprintf("/tmp:rw,nosuid,nodev,size=%d,mode=1777", l.TmpBytes),
		"--user", fmt.Sprintf("%d:%d", uid, gid),
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--pids-limit", strconv.Itoa(l.Processes),
		"--memory", strconv.FormatInt(l.MemoryBytes, 10), "--memory-swap", strconv.FormatInt(l.MemoryBytes, 10),
		"--ulimit", fmt.Sprintf("fsize=%d", l.FileBytes), "--ulimit", "nofile=1024", "--ulimit", "core=0",
		"--env", "HOME=/tmp", "--env", "LANG=C.UTF-8", "--env", "MPLCONFIGDIR=/tmp/.matplotlib", "--env", "MPLBACKEND=Agg",
		// nekro's pip answers pip install (the host refuses it on this backend, saying so).
		"--env", "PATH=" + sandbox.RunPath, "--env", "PYTHONPATH=" + sandbox.RunPythonPath,
		"-v", spec.SharedDir + ":/app/shared:rw",
		// The chat's package layer, read-only over it: only nekro's
		// installer writes it (see sandbox.EnsurePackagesDir, which Start
		// calls first).
		"-v", filepath.Join(spec.SharedDir, sandbox.PackagesDirName) + ":" + sandbox.PackagesDir + ":ro",
		"-v", spec.UploadsDir + ":/app/uploads:ro",
		"-v", spec.RunDir + ":/app/.nekro:ro",
		"-w", "/app",
	}
	if !l.Network {
		a = append(a, "--network", "none")
	}
	if r.SeccompProfile != "" {
		a = append(a, "--security-opt", "seccomp="+r.SeccompProfile)
	}
	a = append(a, r.ExtraArgs...)
	// boot.py waits for the release byte on stdin (fd 0), then replaces
	// stdin with /dev/null before the code runs.
	return append(a, r.Image, r.Python, "-I", "-B", "-u", "/app/.nekro/boot.py",
		strconv.FormatInt(l.MemoryBytes, 10), strconv.FormatInt(l.FileBytes, 10), strconv.Itoa(l.Processes), "0")
}

// hostLabel names this nekro process, so containers left by a killed host
// can be found and removed (Sweep).
func hostLabel() string {
	h, _ := os.Hostname()
	return h + ":" + strconv.Itoa(os.Getpid())
}

// Sweep removes sandbox containers left by nekro processes on this host
// that no longer exist (a host killed with SIGKILL cannot remove its own).
func (r *Runner) Sweep(ctx context.Context) error {
	out, err := r.command(ctx, "ps", "-a", "--filter", "label=nekro.sandbox=1", "--format", `{{.ID}} {{.Label "nekro.host"}}`).Output()
	if err != nil {
		return fmt.Errorf("list sandbox containers: %w", err)
	}
	host, _ := os.Hostname()
	var dead []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		id, label, ok := strings.Cut(line, " ")
		h, pidStr, ok2 := strings.Cut(label, ":")
		if !ok || !ok2 || h != host {
			continue
		}
		pid, err := strconv.Atoi(pidStr)
		if err == nil && pid > 0 && syscall.Kill(pid, 0) == syscall.ESRCH {
			dead = append(dead, id)
		}
	}
	if len(dead) == 0 {
		return nil
	}
	if out, err := r.command(ctx, append([]string{"rm", "-f"}, dead...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("remove stale sandbox containers: %v: %s", err, out)
	}
	return nil
}

// Start creates and starts the container; Python loads the stubs and
// waits for the release byte on stdin.
func (r *Runner) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start sandbox: %w", err)
	}
	l := spec.Limits.WithDefaults()
	uid, gid := spec.UID, spec.GID
	if uid < 0 {
		uid, gid = r.UID, r.GID
	}
	if os.Geteuid() != 0 {
		uid, gid = -1, -1 // a host user cannot give files away
	}
	if _, err := sandbox.EnsurePackagesDir(spec.SharedDir, uid, gid); err != nil {
		return nil, fmt.Errorf("start sandbox: %w", err)
	}
	var b [8]byte
	rand.Read(b[:])
	name := "nekro-run-" + hex.EncodeToString(b[:])
	// Not ctx: the container lives until Wait or Kill, past the start.
	cmd := r.command(context.Background(), r.Args(spec, name)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox release pipe: %w", err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	proc, err := sandbox.StartProc(cmd, l.OutputBytes)
	if err != nil {
		return nil, err
	}
	return &process{Proc: proc, r: r, name: name, stdin: stdin}, nil
}

type process struct {
	*sandbox.Proc
	r     *Runner
	name  string
	stdin io.WriteCloser
}

// Release writes the code to the container's stdin; the docker CLI holds
// it until Python reads it, so there is nothing to wait for here.
func (p *process) Release(_ context.Context, code []byte) error {
	p.MarkReleased()
	err := sandbox.WriteRelease(p.stdin, code)
	p.stdin.Close()
	if err != nil {
		return fmt.Errorf("release sandbox: %w (did the container die while waiting?)", err)
	}
	return nil
}

// Kill removes the container; the docker CLI then exits.
func (p *process) Kill() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p.r.command(ctx, "rm", "-f", p.name).Run()
	p.stdin.Close()
}

func (p *process) Wait(ctx context.Context, timeout time.Duration) (*sandbox.Outcome, error) {
	o, err := p.Proc.Wait(ctx, timeout, p.Kill)
	p.stdin.Close()
	if err != nil {
		return o, err
	}
	switch o.ExitCode {
	case 125:
		return o, fmt.Errorf("docker could not run the sandbox: %s", strings.TrimSpace(o.Output))
	case 137:
		o.ExitCode = -1 // SIGKILL, e.g. the memory limit
	}
	return o, nil
}
