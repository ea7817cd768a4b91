package server

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/nekro-go/nekro/internal/memory"
)

// Who sees which memories of a chat: the operator every one; a member of
// the chat the chat's own memories and those about themselves, never
// another user's. A member may delete what they see (a chat memory is
// the members' shared knowledge: any of them may have it forgotten).

// memoryFilter is what identity(r) may see of a chat's memories.
func memoryFilter(r *http.Request) memory.Filter {
	id := identity(r)
	if id.Admin {
		return memory.Filter{}
	}
	return memory.Filter{Users: []string{"", id.UserID}}
}

func (s *Server) memoriesReady(w http.ResponseWriter) bool {
	if s.parts.Memories == nil {
		writeError(w, http.StatusServiceUnavailable, "memories are not kept by this server")
		return false
	}
	return true
}

// listMemories is GET /api/chats/{chat}/memories: {"memories": [...],
// "enabled": whether memory learns and recalls now}.
func (s *Server) listMemories(w http.ResponseWriter, r *http.Request) {
	key, ok := chatKey(w, r)
	if !ok || !s.memoriesReady(w) {
		return
	}
	ms, err := s.parts.Memories.List(r.Context(), key, memoryFilter(r))
	if err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	if ms == nil {
		ms = []memory.Memory{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"memories": ms, "enabled": s.parts.MemoryEnabled})
}

// deleteMemory is DELETE /api/chats/{chat}/memories/{id}: 204, or 404 for
// a memory the chat does not hold or the caller may not see.
func (s *Server) deleteMemory(w http.ResponseWriter, r *http.Request) {
	key, ok := chatKey(w, r)
	if !ok || !s.memoriesReady(w) {
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		writeError(w, http.StatusBadRequest, "memory id %q is not a positive number", r.PathValue("id"))
		return
	}
	m, err := s.parts.Memories.Get(r.Context(), key, id)
	if err == nil && !visible(memoryFilter(r), m) {
		err = memory.ErrNotFound
	}
	if err == nil {
		err = s.parts.Memories.Delete(r.Context(), key, id)
	}
	switch {
	case errors.Is(err, memory.ErrNotFound):
		writeError(w, http.StatusNotFound, "chat %s has no memory %d", key, id)
	case err != nil:
		writeError(w, http.StatusInternalServerError, "%v", err)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// visible reports whether f keeps m.
func visible(f memory.Filter, m memory.Memory) bool {
	if f.Users == nil {
		return true
	}
	for _, u := range f.Users {
		if m.UserID == u {
			return true
		}
	}
	return false
}
