package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/internal/sandbox/bwrap"
	"github.com/nekro-go/nekro/internal/sandbox/docker"
	"github.com/nekro-go/nekro/internal/sandbox/seccomp"
	"github.com/nekro-go/nekro/internal/sandbox/stub"
	"github.com/nekro-go/nekro/internal/uids"
)

// SandboxConfig chooses and tunes the sandbox backend the runtime runs
// code with. The zero value is bubblewrap with /usr/bin/python3.
type SandboxConfig struct {
	// Backend names it: "bwrap" (default) or "docker".
	Backend string
	// Python is the interpreter inside the sandbox; default
	// /usr/bin/python3.
	Python string
	// DockerImage is the image of the docker backend; default nekro-sandbox.
	DockerImage string
	// DockerArgs are extra `docker run` arguments (e.g. --runtime=runsc).
	DockerArgs []string
	// Zygotes, with Runtime.WarmSpares and the bwrap backend, keeps up to
	// this many warm per-chat zygotes, for chats that run often enough
	// to repay one: their runs then start from a pre-forked,
	// pre-isolated interpreter that has imported the stubs and those of
	// ZygotePreload the chat's code used (about 1 ms instead of ~30 ms
	// plus imports). Zero leaves them off. See
	// internal/sandbox/bwrap/zygote.go and policy.go.
	Zygotes int
	// ZygoteMemory bounds the zygotes' memory together (PSS); default
	// 1 GiB (a new zygote replaces only one unused a while).
	ZygoteMemory int64
	// ZygotePreload lists the modules a zygote may import once, each for
	// chats whose code named it; nil means numpy and matplotlib.pyplot
	// (skipped when not installed).
	ZygotePreload []string
	// UIDs is the range each chat's own sandbox uid comes from when the
	// backend runs sandboxes as other uids (nekro runs as root); zero
	// means uids.DefaultRange.
	UIDs uids.Range
	// Template, with the bwrap backend and nekro as root, starts fresh
	// sandboxes as children of one shared template process instead of a
	// new bwrap each; its user namespace's root is the last uid of UIDs,
	// which then goes to no chat (see internal/sandbox/bwrap/template.go).
	Template bool
}

// chatUIDs is the range chats' uids come from: UIDs (or the default),
// less its last uid when the template has it.
func (sc SandboxConfig) chatUIDs() uids.Range {
	rng := sc.UIDs
	if rng == (uids.Range{}) {
		rng = uids.DefaultRange
	}
	if sc.Template && (sc.Backend == "" || sc.Backend == "bwrap") && rng.Last > rng.First {
		rng.Last--
	}
	return rng
}

// openRunner returns the sandbox backend: rc.Runner when the caller chose
// one, else the one sc names, tuned by sc. A docker backend without a
// seccomp profile gets nekro's, written where the docker CLI reads it:
// with this process's run directories, which a later start removes should
// this process be killed. cleanup removes that file once the runtime is
// closed.
func openRunner(layout files.Layout, rc runtime.Config, sc SandboxConfig, log *slog.Logger) (r sandbox.Runner, cleanup func(), err error) {
	cleanup = func() {}
	r = rc.Runner
	if r == nil {
		switch sc.Backend {
		case "", "bwrap":
			r = bwrap.New(sc.Python)
		case "docker":
			d := docker.New(sc.DockerImage)
			if sc.Python != "" {
				d.Python = sc.Python
			}
			d.ExtraArgs = sc.DockerArgs
			r = d
		default:
			return nil, cleanup, fmt.Errorf("unknown sandbox backend %q (use bwrap or docker)", sc.Backend)
		}
	}
	if b, ok := r.(*bwrap.Runner); ok && rc.WarmSpares && sc.Zygotes > 0 {
		idle := rc.SpareIdle
		if idle <= 0 {
			idle = runtime.DefaultSpareIdle
		}
		b.Zygotes, b.ZygoteMemory, b.ZygoteIdle, b.Preload = sc.Zygotes, sc.ZygoteMemory, idle, sc.ZygotePreload
		b.ZygoteErr = func(err error) { log.Warn("a chat's zygote ended: its runs start fresh sandboxes", "err", err) }
	}
	if b, ok := r.(*bwrap.Runner); ok && sc.Template {
		rng := sc.chatUIDs()
		b.Template, b.TemplateUIDs, b.DataDir = true, bwrap.UIDRange{First: rng.First, Last: rng.Last + 1}, layout.Root
		b.TemplateErr = func(err error) { log.Warn("the sandbox template cannot start: fresh sandboxes use bwrap", "err", err) }
		b.TemplateBoot = stub.Boot()
	}
	if b, ok := r.(*bwrap.Runner); ok && rc.WarmSpares {
		b.FontCache = true       // a server: matplotlib's font cache built once for all its sandboxes
		b.CompileRunFiles = true // and boot.py and the stubs compiled once per content
		b.Warm()                 // now, in the background: not inside its first runs
	}
	if d, ok := r.(*docker.Runner); ok && d.SeccompProfile == "" {
		prof, err := seccomp.DockerProfile()
		if err != nil {
			return r, cleanup, nil // the backend's protections say it runs without one
		}
		dir := filepath.Join(layout.RunsDir(), strconv.Itoa(os.Getpid()))
		if err := os.MkdirAll(dir, 0o711); err != nil {
			return nil, cleanup, fmt.Errorf("docker seccomp profile: %w", err)
		}
		path := filepath.Join(dir, "seccomp.json")
		if err := os.WriteFile(path, prof, 0o644); err != nil {
			return nil, cleanup, fmt.Errorf("docker seccomp profile: %w", err)
		}
		d.SeccompProfile = path
		cleanup = func() {
			os.Remove(path)
			os.Remove(dir) // empty unless runs are still going
		}
	}
	return r, cleanup, nil
}

// openUIDs opens the allocator of the chats' sandbox uids on h when r runs
// sandboxes as other uids than nekro's own (nil otherwise).
func openUIDs(ctx context.Context, h db.Handle, r sandbox.Runner, rng uids.Range) (*uids.Allocator, error) {
	o, ok := r.(sandbox.Owner)
	if !ok {
		return nil, nil
	}
	if uid, _ := o.SandboxUID(); uid < 0 {
		return nil, nil
	}
	if rng == (uids.Range{}) {
		rng = uids.DefaultRange
	}
	return uids.Open(ctx, h, rng)
}
