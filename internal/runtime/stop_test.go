package runtime_test

import (
	"testing"

	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/plugin"
)

func TestDecideStopUsesOnlyHostKnowledge(t *testing.T) {
	cases := []struct {
		o      sandbox.Outcome
		ending plugin.MethodType
		want   sandbox.StopType
	}{
		{sandbox.Outcome{ExitCode: 0}, 0, sandbox.Normal},
		{sandbox.Outcome{ExitCode: 1}, 0, sandbox.Error},
		{sandbox.Outcome{ExitCode: 8}, 0, sandbox.Error},
		{sandbox.Outcome{ExitCode: 11}, 0, sandbox.Error},
		{sandbox.Outcome{ExitCode: 8}, plugin.Agent, sandbox.AgentStop},
		{sandbox.Outcome{ExitCode: 11}, plugin.MultimodalAgent, sandbox.MultimodalAgent},
		{sandbox.Outcome{ExitCode: 9}, 0, sandbox.Manual},
		{sandbox.Outcome{ExitCode: -1, TimedOut: true}, 0, sandbox.Timeout},
		{sandbox.Outcome{ExitCode: -1, Cancelled: true}, 0, sandbox.Manual},
		{sandbox.Outcome{ExitCode: -1}, 0, sandbox.Error},
		{sandbox.Outcome{ExitCode: 0, Output: "[SANDBOX_RUN_ENDS_WITH_AGENT]"}, 0, sandbox.Normal},
	}
	for _, c := range cases {
		if got, _ := runtime.DecideStop(&c.o, c.ending); got != c.want {
			t.Errorf("DecideStop(%+v, %v) = %v, want %v", c.o, c.ending, got, c.want)
		}
	}
}
