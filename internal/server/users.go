package server

// Users and chat membership over the API: the operator issues and
// revokes user tokens and says who belongs to which chat; a user sees
// and posts in their own chats only.

import (
	"errors"
	"net/http"

	"github.com/nekro-go/nekro/adapter"
	"github.com/nekro-go/nekro/internal/keys"
	"github.com/nekro-go/nekro/internal/users"
)

type addUserRequest struct {
	UserID string `json:"user_id"`
	Name   string `json:"name"`
}

// addUser answers POST /api/users: the user and its token, shown once.
func (s *Server) addUser(w http.ResponseWriter, r *http.Request) {
	var req addUserRequest
	if !decode(w, r, maxMessageBody, &req) {
		return
	}
	u, tok, err := s.users.Add(r.Context(), req.UserID, req.Name)
	if err != nil {
		writeError(w, usersStatus(err), "%v", err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"user_id": u.ID, "name": u.Name, "token": tok})
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request) {
	list, err := s.users.List(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"users": list})
}

func (s *Server) removeUser(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.users.Remove(r.Context(), id); err != nil {
		writeError(w, usersStatus(err), "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"user_id": id, "removed": true})
}

func (s *Server) newUserToken(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	tok, err := s.users.NewToken(r.Context(), id)
	if err != nil {
		writeError(w, usersStatus(err), "%v", err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"user_id": id, "token": tok})
}

// setMember answers PUT (add) and DELETE (remove) of
// /api/chats/{chat}/members/{user} with the chat's members.
func (s *Server) setMember(add bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key, ok := chatKey(w, r)
		if !ok {
			return
		}
		uid := r.PathValue("user")
		if add {
			if err := s.users.AddMember(r.Context(), key, uid); err != nil {
				writeError(w, usersStatus(err), "%v", err)
				return
			}
		} else {
			was, err := s.users.RemoveMember(r.Context(), key, uid)
			if err != nil {
				writeError(w, http.StatusInternalServerError, "%v", err)
				return
			}
			if !was {
				writeError(w, http.StatusNotFound, "%s is not a member of chat %s", uid, key)
				return
			}
		}
		s.members(w, r)
	}
}

// members answers GET /api/chats/{chat}/members.
func (s *Server) members(w http.ResponseWriter, r *http.Request) {
	key, ok := chatKey(w, r)
	if !ok {
		return
	}
	m, err := s.users.Members(r.Context(), key)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"chat_key": key, "members": m})
}

// me answers GET /api/me: who the token belongs to.
func (s *Server) me(w http.ResponseWriter, r *http.Request) {
	id := identity(r)
	if id.Admin {
		writeJSON(w, http.StatusOK, map[string]any{"admin": true, "user_id": nil})
		return
	}
	u, err := s.users.Get(r.Context(), id.UserID)
	if err != nil {
		writeError(w, usersStatus(err), "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"admin": false, "user_id": u.ID, "name": u.Name, "chats": u.Chats})
}

// usersStatus maps the users store's errors to a status.
func usersStatus(err error) int {
	var tooLong *keys.TooLongError
	switch {
	case errors.Is(err, users.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, users.ErrExists):
		return http.StatusConflict
	case errors.As(err, &tooLong):
		return http.StatusBadRequest
	}
	return http.StatusBadRequest
}

// postingUser is the user a message posted to chatKey comes from, for
// the request's identity: with the operator's token, the user id the
// request names; with a user's token, that user, who must belong to the
// chat or claim it when it is new: no members, no messages, no turns, no
// runs and no files (chat.Service.Used), and not in a chat platform's
// namespace (adapter.Owner: such a chat belongs to its adapter, and
// only the operator adds members to it). Any other chat is 403: a chat
// the operator used, one whose members the operator removed, a QQ
// user's or group's before they ever wrote, would otherwise go, with
// everything written there later, to whoever posts first. A user token
// naming another user id is refused (403); naming none is the same as
// naming its own. On refusal it writes the answer and returns false.
func (s *Server) postingUser(w http.ResponseWriter, r *http.Request, chatKey, named string) (string, bool) {
	id := identity(r)
	if id.Admin {
		return named, true
	}
	if id.UserID == "" || s.users == nil {
		writeError(w, http.StatusForbidden, "not signed in")
		return "", false
	}
	if named != "" && named != id.UserID {
		writeError(w, http.StatusForbidden, "this token is %s's: it posts as %s only (leave user_id out)", id.UserID, id.UserID)
		return "", false
	}
	member, err := s.users.IsMember(r.Context(), chatKey, id.UserID)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "%v", err)
		return "", false
	}
	if member {
		return id.UserID, true
	}
	if platform, ok := adapter.Owner(chatKey); ok {
		writeError(w, http.StatusForbidden, "chat %s belongs to the %s adapter: a user token cannot create or join a platform's chat; only the operator can add you (nekro chats members %s --add %s)",
			chatKey, platform, chatKey, id.UserID)
		return "", false
	}
	used, err := s.chats.Used(r.Context(), chatKey)
	if err == nil && !used {
		member, err = s.users.Claim(r.Context(), chatKey, id.UserID)
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "%v", err)
		return "", false
	}
	if !member {
		writeError(w, http.StatusForbidden, "chat %s is not yours (it has members, or was used before): ask the operator to add you (nekro chats members %s --add %s)", chatKey, chatKey, id.UserID)
		return "", false
	}
	return id.UserID, true
}

// resetAllowed lets a user reset a chat only when they are its one
// member and it is no chat platform's (its history is the platform
// users', not the API user's); the operator resets any chat.
func (s *Server) resetAllowed(w http.ResponseWriter, r *http.Request, chatKey string) bool {
	id := identity(r)
	if id.Admin {
		return true
	}
	if platform, ok := adapter.Owner(chatKey); ok {
		writeError(w, http.StatusForbidden, "chat %s belongs to the %s adapter: only the operator may reset it", chatKey, platform)
		return false
	}
	m, err := s.users.Members(r.Context(), chatKey)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "%v", err)
		return false
	}
	if len(m) != 1 || m[0] != id.UserID {
		writeError(w, http.StatusForbidden, "chat %s is shared with other users: only the operator may reset it", chatKey)
		return false
	}
	return true
}

// userChatList answers GET /api/chats for a user token: the chat list
// (same shape and paging as the operator's), only the user's chats. It
// pages through the full list and filters, stopping once every one of
// the user's chats was seen.
func (s *Server) userChatList(w http.ResponseWriter, r *http.Request, uid string) {
	limit, before, ok := chatListQuery(w, r)
	if !ok {
		return
	}
	mine, err := s.users.Chats(r.Context(), uid)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "%v", err)
		return
	}
	left := map[string]bool{}
	for _, k := range mine {
		left[k] = true
	}
	out := []any{}
	for len(left) > 0 && len(out) < limit {
		page, err := s.chats.Chats(r.Context(), maxChatListLimit, before)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "%v", err)
			return
		}
		for _, c := range page {
			if left[c.ChatKey] && len(out) < limit {
				delete(left, c.ChatKey)
				out = append(out, c)
			}
			before = c.LastMessage.ID
		}
		if len(page) < maxChatListLimit {
			break
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"chats": out})
}

// chatsFor answers GET /api/chats: every chat for the operator, a user's
// own for a user token.
func (s *Server) chatsFor(w http.ResponseWriter, r *http.Request) {
	if id := identity(r); !id.Admin {
		s.userChatList(w, r, id.UserID)
		return
	}
	s.chatList(w, r)
}

// userStatus answers GET /api/status for a user token: the model and
// whether it can answer; the plugins are the operator's business.
func (s *Server) userStatus(w http.ResponseWriter, r *http.Request) {
	st := map[string]any{"model": s.modelName(r.Context())}
	if err := s.agent.ModelError(); err != nil {
		st["model_error"] = err.Error()
	}
	writeJSON(w, http.StatusOK, st)
}
