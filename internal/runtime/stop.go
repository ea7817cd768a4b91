package runtime

import (
	"fmt"

	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/plugin"
)

// DecideStop derives the stop type from what the host itself knows: the
// outcome of the process and the ending method call the RPC server
// answered, if any (0 when none). Text the code printed plays no part.
func DecideStop(o *sandbox.Outcome, ending plugin.MethodType) (sandbox.StopType, string) {
	switch {
	case ending == plugin.Agent:
		return sandbox.AgentStop, ""
	case ending == plugin.MultimodalAgent:
		return sandbox.MultimodalAgent, ""
	case o.Cancelled:
		return sandbox.Manual, "the run was stopped by the host"
	case o.TimedOut:
		return sandbox.Timeout, ""
	case o.ExitCode == 0:
		return sandbox.Normal, ""
	case o.ExitCode == sandbox.ExitManual:
		return sandbox.Manual, ""
	case o.ExitCode == sandbox.ExitAgent || o.ExitCode == sandbox.ExitMultimodalAgent:
		return sandbox.Error, fmt.Sprintf("exit code %d without an agent method call", o.ExitCode)
	case o.OutOfMemory:
		return sandbox.Error, "the run exceeded its memory limit"
	case o.ExitCode < 0:
		return sandbox.Error, "the interpreter was killed by a signal (out of memory?)"
	}
	return sandbox.Error, ""
}
