package server

import (
	"net/http"

	"github.com/nekro-go/nekro/internal/db"
)

// storageStatus maps a failure of storage to its status: 507 when the
// disk is full (SQLite's SQLITE_FULL, ENOSPC, PostgreSQL's 53100), 503
// when the database cannot be reached or cannot serve now; 0 for any
// other error. The answer's text names the problem and what to do, never
// the error's own text, which may carry addresses and paths: that goes
// to the server's log.
func storageStatus(err error) (int, string) {
	switch {
	case db.IsDiskFull(err):
		return http.StatusInsufficientStorage, "the disk is full: nothing can be stored until the operator frees space"
	case db.IsUnavailable(err):
		return http.StatusServiceUnavailable, "the database cannot be reached: try again shortly"
	}
	return 0, ""
}

// writeFailure answers err: with storageStatus's status when it is a
// failure of storage (and logs it), else with fallback and the error.
func (s *Server) writeFailure(w http.ResponseWriter, fallback int, err error) {
	if status, text := storageStatus(err); status != 0 {
		s.log.Warn("a request failed on storage", "status", status, "err", err)
		w.Header().Set("Retry-After", "5")
		writeError(w, status, "%s", text)
		return
	}
	writeError(w, fallback, "%v", err)
}
