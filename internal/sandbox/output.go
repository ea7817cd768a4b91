package sandbox

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// CappedBuffer keeps the first and last bytes written to it, up to a limit,
// and counts what it dropped from the middle. It is safe for concurrent
// writers.
type CappedBuffer struct {
	mu    sync.Mutex
	limit int
	head  []byte
	tail  []byte // ring of the last limit/2 bytes once head is full
	start int    // ring start
	cut   int64
}

// NewCappedBuffer returns a buffer that keeps at most limit bytes.
func NewCappedBuffer(limit int) *CappedBuffer {
	if limit < 2 {
		limit = 2
	}
	return &CappedBuffer{limit: limit}
}

// Write implements io.Writer; it never fails.
func (b *CappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	headMax := b.limit - b.limit/2
	if room := headMax - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	tailMax := b.limit / 2
	for len(p) > 0 {
		if len(b.tail) < tailMax {
			k := min(tailMax-len(b.tail), len(p))
			b.tail = append(b.tail, p[:k]...)
			p = p[k:]
			continue
		}
		// Ring full: overwrite the oldest bytes.
		k := min(tailMax-b.start, len(p))
		copy(b.tail[b.start:], p[:k])
		b.start = (b.start + k) % tailMax
		b.cut += int64(k)
		p = p[k:]
	}
	return n, nil
}

// String returns head + a note of what was cut + tail.
func (b *CappedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	tail := append(append([]byte(nil), b.tail[b.start:]...), b.tail[:b.start]...)
	if b.cut == 0 {
		return string(b.head) + string(tail)
	}
	head := strings.ToValidUTF8(trimInvalidEnd(b.head), "")
	t := strings.ToValidUTF8(trimInvalidStart(tail), "")
	return fmt.Sprintf("%s\n...[nekro: %d bytes of output cut]...\n%s", head, b.cut, t)
}

// Cut returns how many bytes were dropped.
func (b *CappedBuffer) Cut() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cut
}

func trimInvalidEnd(p []byte) string {
	for i := 0; i < utf8.UTFMax && len(p) > 0; i++ {
		if utf8.Valid(p) {
			break
		}
		p = p[:len(p)-1]
	}
	return string(p)
}

func trimInvalidStart(p []byte) string {
	for i := 0; i < utf8.UTFMax && len(p) > 0 && !utf8.RuneStart(p[0]); i++ {
		p = p[1:]
	}
	return string(p)
}
