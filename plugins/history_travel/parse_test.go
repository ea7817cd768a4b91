package history_travel

import "testing"

// Entries are matched on what was said, not on their headers, whatever
// the sender's name holds.
func TestParseHeader(t *testing.T) {
	for _, c := range []struct {
		in, body string
		id       int64
		system   bool
	}{
		{`[#12 2026-01-02 03:04:05] "Alice" (user id u1): Hello There`, "hello there", 12, false},
		{`[#13 2026-01-02 03:04:05] "Bob: \"the (user id x): boss\"" (user id u2): fish`, "fish", 13, false},
		{`[#14 2026-01-02 03:04:05] (no name) (user id u3): noodles` + "\n    [image attachment: /app/uploads/a.png (image/png, 10 bytes)]",
			"noodles\n    [image attachment: /app/uploads/a.png (image/png, 10 bytes)]", 14, false},
		{`[#15 2026-01-02 03:04:05] you (assistant): Sure`, "sure", 15, false},
		{"[#16 2026-01-02 03:04:05] SYSTEM: [agent method find_history_travel returned]\nx", "[agent method find_history_travel returned]\nx", 16, true},
		{`[#17 2026-01-02 03:04:05] "Carol" (user id u4):`, "", 17, false},
		{`not an entry`, "not an entry", 0, false},
	} {
		e := parse(c.in)
		if e.id != c.id || e.body != c.body || e.system != c.system || e.text != c.in {
			t.Errorf("parse(%q) = %+v", c.in, e)
		}
	}
}
