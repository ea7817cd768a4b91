package agent_test

import (
	"testing"

	"github.com/nekro-go/nekro/internal/agent"
)

func TestExtractCode(t *testing.T) {
	for _, tc := range []struct{ name, reply, want string }{
		{"fenced", "```python\nprint(1)\n```", "print(1)\n"},
		{"prose around", "Sure!\n```python\nprint(1)\n```\nDone.", "print(1)\n"},
		{"longest python block wins", "```python\nx = 1\n```\ntext\n```python\nx = 1\ny = 2\n```", "x = 1\ny = 2\n"},
		{"other languages skipped", "```bash\nrm -rf / --no-preserve-root --really\n```\n```py\nok()\n```", "ok()\n"},
		{"unlabelled fence", "```\nprint(2)\n```", "print(2)\n"},
		{"think dropped", "<think>\n```python\nbad()\n```\n</think>\n```python\ngood()\n```", "good()\n"},
		{"unclosed think", "reasoning ```python\nbad_and_long()\n``` </think>\ngood()", "good()\n"},
		{"no fence: whole reply", "print('plain')\n", "print('plain')\n"},
		{"unclosed fence", "```python\nprint(3)", "print(3)\n"},
		{"indented close", "```python\nif x:\n    y()\n  ```", "if x:\n    y()\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := agent.ExtractCode(tc.reply); got != tc.want {
				t.Fatalf("ExtractCode(%q) = %q, want %q", tc.reply, got, tc.want)
			}
		})
	}
}
