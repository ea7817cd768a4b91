package testutil

import "syscall"

// Kill kills the server with SIGKILL, as a crash or the OOM killer would,
// and waits for it: nothing of it runs its shutdown. Later Stop and Kill
// calls do nothing.
func (s *Served) Kill() {
	if !s.done {
		s.done = true
		s.cmd.Process.Signal(syscall.SIGKILL)
		s.cmd.Wait()
	}
}
