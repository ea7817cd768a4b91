package server

// Authentication: every /api/ call carries a bearer token, the operator's
// (admin: every call) or a user's (package users: that user's chats only).

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/nekro-go/nekro/internal/users"
)

// auth resolves the request's bearer token to an identity, puts it in the
// request's context (users.FromContext) and calls next; an unknown token
// gets 401. The operator's token is compared in constant time; a user's
// is looked up by its SHA-256 in the database on every call, so a removed
// user's token is refused at once, by every process sharing the database.
func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, status, err := s.identify(r)
		if err != nil {
			if status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="nekro"`)
			}
			writeError(w, status, "%v", err)
			return
		}
		next.ServeHTTP(w, r.WithContext(users.WithIdentity(r.Context(), id)))
	})
}

// errBadToken is the 401's text: what to send, and where tokens come from.
var errBadToken = errors.New("missing or wrong API token: send Authorization: Bearer <token> " +
	"(the operator's token is in the data directory's api_token file, or " + EnvAPIToken +
	"; a user's comes from `nekro users add` or POST /api/users)")

// identify returns who the request's token belongs to, or the status and
// error to answer with.
func (s *Server) identify(r *http.Request) (users.Identity, int, error) {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" {
		return users.Identity{}, http.StatusUnauthorized, errBadToken
	}
	if subtle.ConstantTimeCompare([]byte(tok), []byte(s.Token)) == 1 {
		return users.Identity{Admin: true}, 0, nil
	}
	if s.users == nil {
		return users.Identity{}, http.StatusUnauthorized, errBadToken
	}
	uid, err := s.users.Resolve(r.Context(), tok)
	switch {
	case errors.Is(err, users.ErrNotFound):
		return users.Identity{}, http.StatusUnauthorized, errBadToken
	case err != nil:
		s.log.Error("token check failed", "err", err)
		return users.Identity{}, http.StatusServiceUnavailable, errors.New("cannot check the token now: the database did not answer (see GET /healthz)")
	}
	return users.Identity{UserID: uid}, 0, nil
}

// identity returns the request's identity; a request that went through
// no authentication is nobody's (never admin).
func identity(r *http.Request) users.Identity {
	id, _ := users.FromContext(r.Context())
	return id
}

// adminOnly answers 403 to user tokens.
func adminOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !identity(r).Admin {
			writeError(w, http.StatusForbidden, "%s %s is the operator's: a user token may not call it", r.Method, r.URL.Path)
			return
		}
		h(w, r)
	}
}

// memberOnly lets a user reach only the chats they belong to. Any other
// chat, existing or not, is 404 "no such chat", the same answer either
// way, so a user token cannot find out which chats exist.
func (s *Server) memberOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := identity(r)
		if id.Admin {
			h(w, r)
			return
		}
		key, ok := chatKey(w, r)
		if !ok {
			return
		}
		if id.UserID == "" || s.users == nil {
			writeError(w, http.StatusForbidden, "not signed in")
			return
		}
		member, err := s.users.IsMember(r.Context(), key, id.UserID)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "%v", err)
			return
		}
		if !member {
			writeError(w, http.StatusNotFound, "no such chat: %s (or you are not one of its members)", key)
			return
		}
		h(w, r)
	}
}
