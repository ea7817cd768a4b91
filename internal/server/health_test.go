package server_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/testutil"
)

// GET /healthz through the real nekro serve: 200 without a token while
// all is well; 503 naming the database once its SQLite file is deleted
// under the running server (it would still answer from the open file,
// and lose everything at exit).
func TestHealthzThroughNekroServe(t *testing.T) {
	data := testutil.DataDir(t)
	srv := testutil.Serve(t, data, "admin-token-health")
	st, body := srv.Call("GET", "/healthz", "", nil)
	if st != http.StatusOK || !strings.Contains(body, `"status": "ok"`) {
		t.Fatalf("healthy: %d %s", st, body)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(filepath.Join(data, "nekro.db"+suffix)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	st, body = srv.Call("GET", "/healthz", "", nil)
	if st != http.StatusServiceUnavailable || !strings.Contains(body, `"status": "unavailable"`) ||
		!strings.Contains(body, "database: the SQLite database file is gone") {
		t.Errorf("database gone: %d %s", st, body)
	}
	if strings.Contains(body, data) {
		t.Errorf("an unauthenticated answer shows the data directory: %s", body)
	}
}
