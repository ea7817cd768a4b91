package server

// What a chat's users see and what only the operator sees. System
// messages are notes for the model (a method's result, the duplicate
// filter's "System Alert", why a turn failed, naming the host's
// internals) and the operator: a user token's messages, turns and event
// streams leave them out, and turns' errors with them. A failed turn
// tells its users in an assistant message of their own
// (chat.TurnEnd.Notice).

import (
	"context"
	"net/http"

	"github.com/nekro-go/nekro/internal/chat"
)

// forAudience serves the operator with operator and users with users.
func forAudience(operator, users http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if identity(r).Admin {
			operator(w, r)
			return
		}
		users(w, r)
	}
}

// humanMessagesPage is messagesPage without the system messages: a page
// may then hold fewer than limit messages, and next_before still pages on.
func (s *Server) humanMessagesPage(ctx context.Context, key string, limit int, before string) ([]chat.Message, any, error) {
	ms, next, err := s.messagesPage(ctx, key, limit, before)
	out := ms[:0:0]
	for _, m := range ms {
		if m.Role != chat.System {
			out = append(out, m)
		}
	}
	return out, next, err
}

// humanTurnsPage is turnsPage without the turns' errors (the status
// stays).
func (s *Server) humanTurnsPage(ctx context.Context, key string, limit int, before string) ([]chat.Turn, any, error) {
	ts, next, err := s.turnsPage(ctx, key, limit, before)
	for i := range ts {
		ts[i].Error = ""
	}
	return ts, next, err
}

// forHumans is e as a user's event stream shows it: no system messages,
// no turn errors; keep is false for an event to leave out.
func forHumans(e chat.Event) (_ chat.Event, keep bool) {
	if e.Message != nil && e.Message.Role == chat.System {
		return e, false
	}
	if e.Turn != nil && e.Turn.Error != "" {
		t := *e.Turn
		t.Error = ""
		e.Turn = &t
	}
	return e, true
}
