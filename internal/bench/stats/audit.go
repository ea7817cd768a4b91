package stats

import (
	"fmt"
	"strings"

	"github.com/nekro-go/nekro/internal/chat"
)

// AnswerPrefix starts the text of every answer the benches' scripted
// models send: "answered: #12, #13" names the user messages it answers.
const AnswerPrefix = "answered: "

// AuditAnswers counts, over one chat's messages, the user messages no
// answer names (lost) and those more than one names (answered twice).
func AuditAnswers(ms []chat.Message) (lost, twice int) {
	answered := map[string]int{}
	var users []string
	for _, m := range ms {
		switch m.Role {
		case chat.User:
			users = append(users, fmt.Sprintf("#%d", m.ID))
		case chat.Assistant:
			for id := range strings.SplitSeq(strings.TrimPrefix(m.Text, AnswerPrefix), ", ") {
				answered[id]++
			}
		}
	}
	for _, id := range users {
		switch n := answered[id]; {
		case n == 0:
			lost++
		case n > 1:
			twice++
		}
	}
	return lost, twice
}
