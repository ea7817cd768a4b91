package server

import (
	"errors"
	"net/http"

	"github.com/nekro-go/nekro/internal/host"
)

// reloadPlugin answers POST /api/plugins/{key}/reload: the plugin is
// loaded again from its files (a Python plugin) and the next calls go to
// the new version, those in flight finish on the old one. 404 for a
// plugin not loaded from files, 409 when the new version does not load
// (the old one keeps serving; the error says why).
func (s *Server) reloadPlugin(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if err := s.host.ReloadPlugin(r.Context(), key); err != nil {
		status := http.StatusConflict
		if errors.Is(err, host.ErrNotReloadable) {
			status = http.StatusNotFound
		}
		writeError(w, status, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"key": key, "reloaded": true})
}
