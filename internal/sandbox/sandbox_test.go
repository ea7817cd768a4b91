package sandbox_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/plugin"
)

func TestCappedBufferKeepsHeadAndTail(t *testing.T) {
	b := sandbox.NewCappedBuffer(20)
	b.Write([]byte("HEAD-"))
	for i := 0; i < 100; i++ {
		b.Write([]byte("middle"))
	}
	b.Write([]byte("-TAIL"))
	s := b.String()
	if !strings.HasPrefix(s, "HEAD-") || !strings.HasSuffix(s, "-TAIL") {
		t.Errorf("capped %q", s)
	}
	if want := int64(5 + 600 + 5 - 20); b.Cut() != want || !strings.Contains(s, "[nekro: 590 bytes of output cut]") {
		t.Errorf("cut %d (%q), want %d", b.Cut(), s, want)
	}
	small := sandbox.NewCappedBuffer(100)
	small.Write([]byte("all of it"))
	if small.String() != "all of it" || small.Cut() != 0 {
		t.Errorf("small output changed: %q", small.String())
	}
	// A cut through a multi-byte rune leaves valid UTF-8.
	u := sandbox.NewCappedBuffer(11)
	u.Write([]byte(strings.Repeat("é", 50)))
	if !utf8.ValidString(u.String()) {
		t.Errorf("invalid UTF-8: %q", u.String())
	}
}

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
		if got, _ := sandbox.DecideStop(&c.o, c.ending); got != c.want {
			t.Errorf("DecideStop(%+v, %v) = %v, want %v", c.o, c.ending, got, c.want)
		}
	}
}
