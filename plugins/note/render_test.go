package note

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// However many and however long the notes, the injected text stays
// within maxInject (the host would cut it mid-note), and the latest
// note is always the one shown.
func TestRenderStaysWithinTheBound(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := Settings{MaxNoteLength: 72, CleanThreshold: 12, DetailLimit: 50, DedupSimilarity: 0.7}
	for _, c := range []struct {
		notes, titleLen, descLen int
	}{{1, 10, 10}, {12, 10, 2000}, {50, 20, 60}, {60, 30, 200}, {400, 20, 20}, {300, 500, 500}} {
		var b book
		for i := range c.notes {
			b.Notes = append(b.Notes, entry{
				Title:       fmt.Sprintf("%04d", i) + strings.Repeat("t", c.titleLen),
				Description: strings.Repeat("d", c.descLen),
				StartTime:   now.Unix() - int64(c.notes-i)*90_000,
			})
		}
		text := render(b, s, now)
		last := fmt.Sprintf("%04d", c.notes-1)
		if len(text) > maxInject || !strings.Contains(text, last) {
			t.Errorf("%d notes of %d+%d characters: %d bytes, latest %s shown: %v\n%s",
				c.notes, c.titleLen, c.descLen, len(text), last, strings.Contains(text, last), text)
		}
		detailed := strings.Count(text, "note_title:")
		switch {
		case c.notes <= s.CleanThreshold && detailed != c.notes:
			t.Errorf("%d notes: %d detailed, want all", c.notes, detailed)
		case c.notes > s.CleanThreshold && (detailed == 0 || !strings.Contains(text, "[Older notes (") ||
			!strings.Contains(text, "Warning: You have too many notes.")):
			t.Errorf("%d notes: %d detailed, or no older titles or warning:\n%s", c.notes, detailed, text)
		}
	}
}

// The times read as the reference's, with days once past one.
func TestClock(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "00:00:00", 59 * time.Second: "00:00:59", 3*time.Hour + 4*time.Minute + 5*time.Second: "03:04:05",
		26 * time.Hour: "1d 02:00:00", -time.Second: "00:00:00",
	} {
		if got := clock(d); got != want {
			t.Errorf("clock(%v) = %q, want %q", d, got, want)
		}
	}
}
