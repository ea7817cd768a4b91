package kvtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// PostgresURL returns NEKRO_TEST_DATABASE_URL. Without it the test is
// skipped on a developer's machine but fails in CI (CI or
// NEKRO_REQUIRE_POSTGRES set): a suite that silently skips PostgreSQL
// proves nothing. `source .ci/postgres.sh` provides a server.
func PostgresURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("NEKRO_TEST_DATABASE_URL")
	if u != "" {
		return u
	}
	if os.Getenv("CI") != "" || os.Getenv("NEKRO_REQUIRE_POSTGRES") != "" {
		t.Fatal("NEKRO_TEST_DATABASE_URL is not set, and CI requires PostgreSQL (source .ci/postgres.sh)")
	}
	t.Skip("NEKRO_TEST_DATABASE_URL is not set; `source .ci/postgres.sh` to run against PostgreSQL")
	return ""
}

// FreshSchema creates an empty schema in the database at base and returns
// a URL whose connections use it; the schema is dropped when the test
// ends. Tests sharing one server thus never see each other's tables.
func FreshSchema(t testing.TB, base string) string {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 6)
	rand.Read(b)
	schema := "kvtest_" + hex.EncodeToString(b)
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Error(err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("NEKRO_TEST_DATABASE_URL must be a postgres:// URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
