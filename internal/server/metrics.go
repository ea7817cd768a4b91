package server

import "net/http"

// metrics answers GET /metrics, the Prometheus text format, to the
// operator's token only (a scraper sends it as a bearer token, e.g.
// Prometheus' authorization.credentials_file pointing at api_token): the
// numbers describe every chat's traffic.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if s.parts.Metrics == nil {
		writeError(w, http.StatusNotFound, "no metrics in this server")
		return
	}
	s.parts.Metrics.Handler().ServeHTTP(w, r)
}
