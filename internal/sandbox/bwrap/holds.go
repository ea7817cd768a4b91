package bwrap

import (
	"encoding/json"

	"golang.org/x/sys/unix"

	"github.com/nekro-go/nekro/internal/sandbox"
)

var (
	_ sandbox.DirHolder   = (*Runner)(nil)
	_ sandbox.DirReleaser = (*Runner)(nil)
)

// HoldsDir reports whether the zygote of the chat whose shared directory
// is sharedDir is alive: it and its spares have the chat's directories
// mounted (sandbox.DirHolder).
func (r *Runner) HoldsDir(sharedDir string) bool {
	r.zmu.Lock()
	z := r.zygotes[sharedDir]
	r.zmu.Unlock()
	return z != nil && !z.isDead()
}

// ReleaseDir has the template drop the base mount namespace it keeps of
// the chat whose shared directory is sharedDir (sandbox.DirReleaser). The
// template knows the chat's bases by uid, not by path: it is told the
// directory's device and inode, which it compares with each base's bind.
func (r *Runner) ReleaseDir(sharedDir string) {
	r.tmu.Lock()
	t := r.tmpl
	r.tmu.Unlock()
	var st unix.Stat_t
	if t == nil || !t.alive() || unix.Lstat(sharedDir, &st) != nil {
		return
	}
	msg, _ := json.Marshal(map[string][2]uint64{"drop": {st.Dev, st.Ino}})
	t.ctlMu.RLock()
	defer t.ctlMu.RUnlock()
	if !t.closed {
		unix.Sendmsg(int(t.ctl.Fd()), msg, nil, nil, 0)
	}
}
