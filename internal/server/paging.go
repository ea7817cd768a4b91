package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/nekro-go/nekro/internal/chat"
)

// Paging of a chat's messages, turns and runs:
//
//	GET /api/chats/{chat}/messages?limit=N&before=ID
//
// answers the N items before ID (the newest N without before), oldest
// first, as {"chat_key", "<field>": [...], "next_before": ID or null}:
// next_before is the before of the page of older items, null when none
// is left. limit is 1 to chat.MaxPageLimit, chat.DefaultPageLimit when
// absent; bad values answer 400. Messages and turns are named by their
// numeric id, runs by their run_id.

// pageLister returns one page of a chat's list and the next page's before
// (nil when none is left).
type pageLister[T any] func(ctx context.Context, chatKey string, limit int, before string) ([]T, any, error)

// errBadBefore is a lister's answer to a before it cannot read.
var errBadBefore = errors.New("before must name an item of the list: a positive id")

// chatPage answers GET /api/chats/{chat}/<field>?limit=&before= with a
// page of what list returns for the chat.
func chatPage[T any](field string, list pageLister[T]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key, ok := chatKey(w, r)
		if !ok {
			return
		}
		q := r.URL.Query()
		limit := chat.DefaultPageLimit
		if v := q.Get("limit"); v != "" || q.Has("limit") {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > chat.MaxPageLimit {
				writeError(w, http.StatusBadRequest, "limit must be a number from 1 to %d (default %d)", chat.MaxPageLimit, chat.DefaultPageLimit)
				return
			}
			limit = n
		}
		before := q.Get("before")
		if q.Has("before") && before == "" {
			writeError(w, http.StatusBadRequest, "before is empty: leave it out for the newest page, or pass next_before")
			return
		}
		items, next, err := list(r.Context(), key, limit, before)
		switch {
		case errors.Is(err, errBadBefore), errors.Is(err, chat.ErrNoSuchRun):
			writeError(w, http.StatusBadRequest, "before=%q: %v", before, err)
			return
		case err != nil:
			writeError(w, http.StatusInternalServerError, "%v", err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"chat_key": key, field: items, "next_before": next})
	}
}

// idBefore reads a before that is a message or turn id ("" for none).
func idBefore(before string) (int64, error) {
	if before == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(before, 10, 64)
	if err != nil || n < 1 {
		return 0, errBadBefore
	}
	return n, nil
}

// nextID is a next_before for JSON: the id, or null for 0.
func nextID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

func (s *Server) messagesPage(ctx context.Context, key string, limit int, before string) ([]chat.Message, any, error) {
	b, err := idBefore(before)
	if err != nil {
		return nil, nil, err
	}
	ms, next, err := s.chats.MessagesPage(ctx, key, limit, b)
	return ms, nextID(next), err
}

func (s *Server) turnsPage(ctx context.Context, key string, limit int, before string) ([]chat.Turn, any, error) {
	b, err := idBefore(before)
	if err != nil {
		return nil, nil, err
	}
	ts, next, err := s.chats.TurnsPage(ctx, key, limit, b)
	return ts, nextID(next), err
}

func (s *Server) runsPage(ctx context.Context, key string, limit int, before string) ([]chat.Run, any, error) {
	rs, next, err := s.chats.RunsPage(ctx, key, limit, before)
	if next == "" {
		return rs, nil, err
	}
	return rs, next, err
}
