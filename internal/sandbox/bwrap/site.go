package bwrap

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// A fresh sandbox's interpreter starts with -S: Python's site module,
// which adds the site-packages directories, runs every .pth file in them
// and defines exit, quit and help, is about half of an interpreter's start
// (15.6 ms of CPU against 7.3 with -S on the 2-core machine of
// docs/benchmarks.md), paid by every fresh sandbox. boot.py does what the
// code relies on instead: it adds the directories site would add, found
// once here by asking the interpreter itself, and the builtins. What the
// .pth files would run is not run; a run that needs site's full work can
// `import site; site.main()`.
//
// Zygotes keep site: they start rarely and their runs inherit what they
// imported.

// siteProbeTimeout bounds the two interpreter starts of the probe.
const siteProbeTimeout = 10 * time.Second

// sitePaths returns, joined by ":", the sys.path entries the interpreter's
// site module adds, in order, and whether the probe worked: when it did
// not, sandboxes start without -S, as before.
func (r *Runner) sitePaths() (string, bool) {
	r.siteOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), siteProbeTimeout)
		defer cancel()
		with, err1 := interpreterPath(ctx, r.Python, "-I")
		without, err2 := interpreterPath(ctx, r.Python, "-I", "-S")
		if err1 != nil || err2 != nil {
			return
		}
		var added []string
		for _, p := range with {
			if p == "" || strings.Contains(p, ":") || slices.Contains(without, p) {
				continue
			}
			added = append(added, p)
		}
		r.siteDirs, r.siteOK = strings.Join(added, ":"), true
	})
	return r.siteDirs, r.siteOK
}

// interpreterPath is python's sys.path when started with flags.
func interpreterPath(ctx context.Context, python string, flags ...string) ([]string, error) {
	args := append(slices.Clone(flags), "-c", "import json, sys; print(json.dumps(sys.path))")
	out, err := exec.CommandContext(ctx, python, args...).Output()
	if err != nil {
		return nil, err
	}
	var path []string
	if err := json.Unmarshal(out, &path); err != nil {
		return nil, err
	}
	return path, nil
}
