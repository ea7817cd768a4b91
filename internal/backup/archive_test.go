package backup_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/nekro-go/nekro/internal/backup"
	"github.com/nekro-go/nekro/internal/testutil"
)

// archiveOf builds a gzipped tar of a manifest and the given entries.
func archiveOf(t *testing.T, m backup.Manifest, entries map[string]string) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	mb, _ := json.Marshal(m)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: backup.ManifestName, Mode: 0o600, Size: int64(len(mb))})
	tw.Write(mb)
	for name, content := range entries {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o600, Size: int64(len(content))})
		tw.Write([]byte(content))
	}
	tw.Close()
	gz.Close()
	return &buf
}

// An archive whose entries would leave the data directory is refused,
// and so is one of a newer format.
func TestRestoreRefusesHostileAndNewerArchives(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"../escaped", "/etc/escaped", "plugins/../../escaped"} {
		dir := filepath.Join(t.TempDir(), "data")
		_, err := backup.Restore(ctx, archiveOf(t, backup.Manifest{Format: 1}, map[string]string{name: "x"}), dir)
		if err == nil || !strings.Contains(err.Error(), "leaves the data directory") {
			t.Errorf("entry %q: %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escaped")); err == nil {
			t.Errorf("entry %q was written outside", name)
		}
	}
	_, err := backup.Restore(ctx, archiveOf(t, backup.Manifest{Format: backup.Format + 1, Version: "v9"}, nil), filepath.Join(t.TempDir(), "data"))
	if err == nil || !strings.Contains(err.Error(), "format") {
		t.Errorf("a newer format: %v", err)
	}
	if _, err := backup.Restore(ctx, strings.NewReader("not gzip"), filepath.Join(t.TempDir(), "data")); err == nil {
		t.Errorf("a file that is no archive was restored")
	}
}

// On PostgreSQL the archive holds the data directory's files and says
// that the database is not in it.
func TestBackupOnPostgresHoldsFilesOnly(t *testing.T) {
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, "names.key"), []byte("k"), 0o600)
	var buf bytes.Buffer
	m, err := backup.Create(context.Background(), backup.Options{DataDir: data, DatabaseURL: "postgres://nekro@127.0.0.1:1/nekro"}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if m.Database != backup.DatabasePostgres {
		t.Errorf("manifest database %q", m.Database)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	if _, err := backup.Restore(context.Background(), &buf, dir); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "names.key")); string(b) != "k" {
		t.Errorf("names.key restored as %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "nekro.db")); err == nil {
		t.Errorf("a database came back from a PostgreSQL backup")
	}
}

// A binary older than the database (here: one that knows fewer chat
// migrations than the database records) refuses it, naming the fix:
// rolling back needs the backup taken before the upgrade.
func TestAnOlderBinaryRefusesANewerDatabase(t *testing.T) {
	data := testutil.DataDir(t)
	if r := testutil.RunNekro(t, nil, "chats", "list", "--data", data); r.Code != 0 {
		t.Fatalf("chats list: %+v", r)
	}
	d, err := sql.Open("sqlite", filepath.Join(data, "nekro.db"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Exec(`INSERT INTO nekro_migrations (component, version, name, applied_at)
		SELECT 'chat', MAX(version) + 1, 'from the future', '2099-01-01T00:00:00Z' FROM nekro_migrations WHERE component = 'chat'`)
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	r := testutil.RunNekro(t, nil, "chats", "list", "--data", data)
	if r.Code == 0 || !strings.Contains(r.Stderr, "newer than this binary") || !strings.Contains(r.Stderr, "upgrade nekro") {
		t.Errorf("an older binary opened a newer database: %+v", r)
	}
}
