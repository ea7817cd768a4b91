package app

import (
	"testing"

	"github.com/nekro-go/nekro/internal/uids"
)

// With the sandbox template on, the last uid of the range is the
// template's own and no chat's; off, or with Docker, the range is whole.
func TestTemplateKeepsTheLastUIDFromChats(t *testing.T) {
	r := uids.Range{First: 2_000_000, Last: 2_000_099}
	for _, c := range []struct {
		sc   SandboxConfig
		want uids.Range
	}{
		{SandboxConfig{UIDs: r}, r},
		{SandboxConfig{UIDs: r, Template: true}, uids.Range{First: 2_000_000, Last: 2_000_098}},
		{SandboxConfig{UIDs: r, Template: true, Backend: "docker"}, r},
		{SandboxConfig{Template: true}, uids.Range{First: uids.DefaultRange.First, Last: uids.DefaultRange.Last - 1}},
	} {
		if got := c.sc.chatUIDs(); got != c.want {
			t.Errorf("%+v: chats get %s, want %s", c.sc, got, c.want)
		}
	}
}
