package sandbox_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nekro-go/nekro/internal/sandbox"
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
