package adapter

import (
	"math/rand/v2"
	"slices"
	"strings"
)

// ReplyRule decides when the bot answers, as the reference does: always
// in a private chat; in a group when it is mentioned, when one of its
// names appears in the text, or by chance (Probability); never to its own
// messages; and only in the groups listed, when a list is given.
type ReplyRule struct {
	// Names are the bot's names (case-insensitive); the platform's
	// nickname of the bot counts too (Event.BotNames).
	Names []string
	// Probability of answering any other group message, 0 to 1.
	Probability float64
	// Groups, when not empty, are the only groups (channel ids) the bot
	// reads and answers; messages of other groups are ignored.
	Groups []string
}

// Event is what ReplyRule looks at.
type Event struct {
	Private  bool
	Group    string   // the group's id, for Groups
	FromSelf bool     // the bot sent it
	Mention  bool     // the bot is mentioned (@ or a reply to it)
	Text     string   // the text, to look for the bot's names
	BotNames []string // names the platform knows the bot by
}

// Allowed says whether messages of the event's chat are read at all: not
// the bot's own, and a private chat or an allowed group.
func (r ReplyRule) Allowed(e Event) bool {
	if e.FromSelf {
		return false
	}
	return e.Private || len(r.Groups) == 0 || slices.Contains(r.Groups, e.Group)
}

// Answer says whether the bot answers the event (Allowed, and addressed
// to it or drawn by chance).
func (r ReplyRule) Answer(e Event) bool {
	if !r.Allowed(e) {
		return false
	}
	if e.Private || e.Mention {
		return true
	}
	text := strings.ToLower(e.Text)
	for _, n := range append(slices.Clip(r.Names), e.BotNames...) {
		if n = strings.ToLower(strings.TrimSpace(n)); n != "" && strings.Contains(text, n) {
			return true
		}
	}
	return r.Probability > 0 && rand.Float64() < r.Probability
}
