package backup_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
	"github.com/nekro-go/nekro/internal/volume"
)

// An operator backs up a serving nekro and restores the archive into a
// new data directory: the restored instance shows the same chats and
// messages, the KV value a plugin stored, the plugin settings, the
// uploaded file (downloaded through the API) and the file the code left
// in /app/shared. The archive holds the volumes' contents, never their
// sparse images; restore refuses a data directory that is not empty.
func TestBackupOfAServingInstanceRestores(t *testing.T) {
	model, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		return llmtest.Code("send_msg_text(_ck, \"answered in " + r.ChatKey() + "\")")
	})
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	const token = "tok-backup"
	env := []string{"NEKRO_LLM_BASE_URL=" + model.URL, "NEKRO_LLM_MODEL=scripted"}
	data := testutil.DataDir(t)
	s := testutil.Serve(t, data, token, env...)

	waitFor := func(s *testutil.Served, chat, want string) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if _, h := s.API("GET", "/api/chats/"+chat+"/messages", nil); strings.Contains(h, want) {
				return
			}
			if time.Now().After(deadline) {
				_, h := s.API("GET", "/api/chats/"+chat+"/messages", nil)
				t.Fatalf("chat %s never showed %q:\n%s\n%s", chat, want, h, s.Logs)
			}
		}
	}
	exec := func(s *testutil.Served, chat, code string) string {
		t.Helper()
		st, body := s.API("POST", "/api/chats/"+chat+"/exec", map[string]string{"code": code})
		if st != http.StatusOK {
			t.Fatalf("exec in %s: %d %s\n%s", chat, st, body, s.Logs)
		}
		return body
	}

	// Chat a: a message with a file; chat b: a message.
	postFile(t, s, "a", "here is my list", "notes.txt", []byte("milk and eggs"))
	waitFor(s, "a", "answered in a")
	if st, body := s.API("POST", "/api/chats/b/messages", map[string]string{"user_id": "u1", "text": "hello from b"}); st != http.StatusAccepted {
		t.Fatalf("post b: %d %s", st, body)
	}
	waitFor(s, "b", "answered in b")
	// A KV value through a plugin, and a file in the chat's shared volume.
	if out := exec(s, "a", `set_note(_ck, "colour", "the user likes teal")
open("/app/shared/result.txt", "w").write("forty-two")
print("done")`); !strings.Contains(out, `done\n`) {
		t.Fatalf("exec: %s", out)
	}
	// A plugin's settings.
	if st, body := s.API("PUT", "/api/plugins/nekro.basic/config", map[string]any{"ENABLE_VIEW_STR_CONTENT": false}); st != http.StatusOK {
		t.Fatalf("config: %d %s", st, body)
	}

	// A model group edited through the API: its key is sealed in the
	// database with models.key, which the archive must hold.
	const modelKey = "sk-backup-secret-3333"
	if st, body := s.API("PUT", "/api/models", map[string]any{"default": "chat", "groups": []map[string]any{
		{"name": "chat", "base_url": model.URL, "model": "scripted", "api_key": modelKey}}}); st != http.StatusOK {
		t.Fatalf("PUT /api/models: %d %s", st, body)
	}

	archive := filepath.Join(filepath.Dir(data), "nekro-backup.tar.gz")
	if r := testutil.RunNekro(t, nil, "backup", "--data", data, archive); r.Code != 0 {
		t.Fatalf("backup while serving: %+v", r)
	}
	// The server kept serving through it.
	if st, _ := s.API("POST", "/api/chats/b/messages", map[string]string{"user_id": "u1", "text": "still there?"}); st != http.StatusAccepted {
		t.Fatalf("post after the backup: %d", st)
	}
	s.Stop()

	// What the archive holds.
	fi, err := os.Stat(archive)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("the archive is mode %v, want 0600 (it holds the token and names.key)", fi.Mode().Perm())
	}
	entries := listArchive(t, archive)
	if entries[0].Name != "nekro-backup.json" {
		t.Errorf("the first entry is %s, not the manifest", entries[0].Name)
	}
	has := func(pred func(h *tar.Header) bool) bool {
		for _, h := range entries {
			if pred(h) {
				return true
			}
		}
		return false
	}
	for what, pred := range map[string]func(h *tar.Header) bool{
		"nekro.db":            func(h *tar.Header) bool { return h.Name == "nekro.db" },
		"names.key":           func(h *tar.Header) bool { return h.Name == "names.key" },
		"models.key":          func(h *tar.Header) bool { return h.Name == "models.key" },
		"the plugin settings": func(h *tar.Header) bool { return h.Name == "plugins/nekro.basic/config.yaml" },
		"the uploaded file": func(h *tar.Header) bool {
			return strings.HasPrefix(h.Name, "uploads/") && strings.HasSuffix(h.Name, "/notes.txt")
		},
		"the code's own files": func(h *tar.Header) bool {
			return strings.HasPrefix(h.Name, "sandboxes/") && strings.HasSuffix(h.Name, "/result.txt")
		},
	} {
		if !has(pred) {
			t.Errorf("the archive lacks %s", what)
		}
	}
	for _, h := range entries {
		if strings.HasPrefix(h.Name, "volumes/") || strings.HasSuffix(h.Name, ".img") || strings.HasPrefix(h.Name, "runs/") ||
			h.Name == "nekro.db-wal" || strings.Contains(h.Name, "lost+found") {
			t.Errorf("the archive holds %s", h.Name)
		}
		// Everything here is small: the database and a few short files.
		if h.Size > 8<<20 {
			t.Errorf("%s takes %d bytes in the archive", h.Name, h.Size)
		}
	}
	if fi.Size() > 4<<20 {
		t.Errorf("the archive is %d bytes", fi.Size())
	}

	// Stopped, its volumes unmounted: backup mounts them to read them, and
	// leaves none mounted.
	stopped := filepath.Join(filepath.Dir(data), "stopped.tar.gz")
	if r := testutil.RunNekro(t, nil, "backup", "--data", data, stopped); r.Code != 0 {
		t.Fatalf("backup of a stopped instance: %+v", r)
	}
	found := false
	for _, h := range listArchive(t, stopped) {
		found = found || strings.HasSuffix(h.Name, "/result.txt")
	}
	if !found {
		t.Errorf("the backup of the stopped instance lacks the chat's shared file")
	}
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); bytes.Contains(mounts, []byte(data+"/")) {
		t.Errorf("volumes of %s are still mounted after the backup", data)
	}

	// Restore refuses a data directory that is not empty.
	if r := testutil.RunNekro(t, nil, "restore", "--data", data, archive); r.Code == 0 || !strings.Contains(r.Stderr, "not empty") {
		t.Errorf("restore over the original: %+v", r)
	}
	restored := testutil.DataDir(t)
	if r := testutil.RunNekro(t, nil, "restore", "--data", restored, archive); r.Code != 0 {
		t.Fatalf("restore: %+v", r)
	}
	s2 := testutil.Serve(t, restored, token, env...)
	if _, body := s2.API("GET", "/api/chats", nil); !strings.Contains(body, `"a"`) || !strings.Contains(body, `"b"`) {
		t.Errorf("restored chats: %s", body)
	}
	for chat, want := range map[string][]string{"a": {"here is my list", "answered in a"}, "b": {"hello from b", "answered in b"}} {
		_, h := s2.API("GET", "/api/chats/"+chat+"/messages", nil)
		for _, w := range want {
			if !strings.Contains(h, w) {
				t.Errorf("restored chat %s lacks %q: %s", chat, w, h)
			}
		}
	}
	if st, body := s2.API("GET", "/api/chats/a/uploads/notes.txt", nil); st != http.StatusOK || body != "milk and eggs" {
		t.Errorf("restored upload: %d %q", st, body)
	}
	if _, body := s2.API("GET", "/api/plugins/nekro.basic/config", nil); !strings.Contains(body, `"ENABLE_VIEW_STR_CONTENT":false`) &&
		!strings.Contains(body, `"ENABLE_VIEW_STR_CONTENT": false`) {
		t.Errorf("restored settings: %s", body)
	}
	out := exec(s2, "a", `print(get_note(_ck, "colour"))
print(open("/app/shared/result.txt").read())`)
	if !strings.Contains(out, "the user likes teal") || !strings.Contains(out, "forty-two") {
		t.Errorf("restored KV value and shared file: %s", out)
	}
	// The stored model key is sealed in the database, and opened with the
	// restored models.key: the restored instance's turns send it.
	if db, err := os.ReadFile(filepath.Join(restored, "nekro.db")); err != nil || bytes.Contains(db, []byte(modelKey)) {
		t.Errorf("the restored database holds the model key in the clear (%v)", err)
	}
	if st, _ := s2.API("POST", "/api/chats/b/messages", map[string]string{"user_id": "u1", "text": "after the restore"}); st != http.StatusAccepted {
		t.Fatalf("post after the restore: %d", st)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		reqs := model.Requests()
		if last := reqs[len(reqs)-1]; last.Contains("after the restore") {
			if last.Auth != "Bearer "+modelKey {
				t.Errorf("the restored instance sent the key %q", last.Auth)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restored instance never asked the model:\n%s", s2.Logs)
		}
	}
	if volume.Available() == nil {
		// The restored chat's files moved into a volume of their own.
		images, _ := filepath.Glob(filepath.Join(restored, "volumes", "chats", "*.img"))
		if len(images) == 0 {
			t.Errorf("the restored uploads are not on a volume:\n%s", s2.Logs)
		}
	}
	s2.Stop()
}

// postFile posts text with one file to chat as multipart/form-data.
func postFile(t *testing.T, s *testutil.Served, chat, text, name string, content []byte) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("user_id", "u1")
	mw.WriteField("text", text)
	w, _ := mw.CreateFormFile("file", name)
	w.Write(content)
	mw.Close()
	req, _ := http.NewRequest("POST", "http://"+s.Addr+"/api/chats/"+chat+"/messages", &body)
	req.Header.Set("Authorization", "Bearer "+s.Token)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("post a file: %d %s", resp.StatusCode, b)
	}
}

// listArchive returns the archive's headers in order.
func listArchive(t *testing.T, path string) []*tar.Header {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var out []*tar.Header
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, h)
	}
}
