package server_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/nekro-go/nekro/internal/kv/kvtest"
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

// The same on PostgreSQL: a database that stops answering the health
// query (its users table renamed away underneath the server) is 503, and
// 200 again once it is back.
func TestHealthzPostgresThroughNekroServe(t *testing.T) {
	u := kvtest.FreshSchema(t, kvtest.PostgresURL(t))
	srv := testutil.Serve(t, testutil.DataDir(t), "admin-token-health-pg", "NEKRO_DATABASE_URL="+u)
	if st, body := srv.Call("GET", "/healthz", "", nil); st != http.StatusOK {
		t.Fatalf("healthy: %d %s", st, body)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "ALTER TABLE users RENAME TO users_away"); err != nil {
		t.Fatal(err)
	}
	st, body := srv.Call("GET", "/healthz", "", nil)
	if st != http.StatusServiceUnavailable || !strings.Contains(body, "database: a trivial query failed") {
		t.Errorf("broken database: %d %s", st, body)
	}
	if _, err := conn.Exec(ctx, "ALTER TABLE users_away RENAME TO users"); err != nil {
		t.Fatal(err)
	}
	if st, body := srv.Call("GET", "/healthz", "", nil); st != http.StatusOK {
		t.Errorf("repaired: %d %s", st, body)
	}
}
