package bwrap

import "github.com/nekro-go/nekro/internal/sandbox"

var _ sandbox.DirHolder = (*Runner)(nil)

// HoldsDir reports whether the zygote of the chat whose shared directory
// is sharedDir is alive: it and its spares have the chat's directories
// mounted (sandbox.DirHolder).
func (r *Runner) HoldsDir(sharedDir string) bool {
	r.zmu.Lock()
	z := r.zygotes[sharedDir]
	r.zmu.Unlock()
	return z != nil && !z.isDead()
}
