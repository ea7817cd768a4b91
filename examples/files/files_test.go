package files_test

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/testutil"
)

// The file examples, driven by Python snippets through `nekro exec`: the
// same binary and sandbox the AI's code uses, with real uploads and real
// downloads from a local HTTP server.

const chat = "group_1"

// chatPart is the name of the test chat's part of the plugin's per-chat
// directories (images/, logs/, exports/, user_uploads/).
const chatPart = "sandbox_" + chat

// pluginDir is the examples plugin's data directory under data.
func pluginDir(data string) string {
	return filepath.Join(data, "plugins", "nekro_examples.files")
}

type execJSON struct {
	StopType string `json:"stop_type"`
	Output   string `json:"output"`
}

// run executes a snippet from testdata, with {{URL}} replaced by url.
func run(t *testing.T, data, snippet, url string, args ...string) string {
	t.Helper()
	code, err := os.ReadFile(filepath.Join("testdata", snippet))
	if err != nil {
		t.Fatal(err)
	}
	code = []byte(strings.ReplaceAll(string(code), "{{URL}}", url))
	argv := append([]string{"--data", data, "exec", "--chat", chat, "--user", "u1", "--json"}, args...)
	r := testutil.RunNekroExamples(t, code, append(argv, "-")...)
	testutil.MountVolumes(t, data) // to look at the plugin's files
	var res execJSON
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("%s: %v\nstdout %s\nstderr %s", snippet, err, r.Stdout, r.Stderr)
	}
	if res.StopType != "NORMAL" {
		t.Fatalf("%s stopped with %s:\n%s\nstderr %s", snippet, res.StopType, res.Output, r.Stderr)
	}
	return res.Output
}

// wantLines checks that out holds each line, in order.
func wantLines(t *testing.T, out string, lines ...string) {
	t.Helper()
	rest := out
	for _, l := range lines {
		i := strings.Index(rest, l)
		if i < 0 {
			t.Errorf("output lacks %q (in order); output:\n%s", l, out)
			return
		}
		rest = rest[i+len(l):]
	}
}

func TestDataDirectoryExamples(t *testing.T) {
	data := testutil.DataDir(t)
	for _, p := range []string{"/tmp/nekro_files_escape", "/tmp/nekro_files_abs_escape"} {
		os.Remove(p)
	}
	// Two temp files, one three hours old, for cleanup_temp_files.
	temp := filepath.Join(pluginDir(data), "temp")
	if err := os.MkdirAll(temp, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"old.tmp", "new.tmp"} {
		if err := os.WriteFile(filepath.Join(temp, n), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-3 * time.Hour)
	os.Chtimes(filepath.Join(temp, "old.tmp"), old, old)

	out := run(t, data, "data_dir.py", "")
	wantLines(t, out,
		`配置内容: {`, `"cache_ttl": 3600`,
		"日志已保存到 log_",
		"图片已保存: images/cat.png",
		"refused: ../config.json",
		"refused: ../../../../../../../../tmp/nekro_files_escape",
		"refused: /tmp/nekro_files_abs_escape",
		"refused: sub/../../x",
		"暂无导出文件",
		"数据已导出: /app/shared/table.csv",
		"a,b\n1,2\n",
		"导出文件列表:\n- table.csv",
		"refused export:",
		"清理完成,删除了 1 个文件",
		"清理完成,删除了 0 个文件",
	)
	if strings.Contains(out, "saved?") {
		t.Errorf("a hostile image name was saved:\n%s", out)
	}

	dir := pluginDir(data)
	for _, d := range []string{"cache", "models", "exports", "temp", "user_uploads", "logs", "images"} {
		if fi, err := os.Stat(filepath.Join(dir, d)); err != nil || !fi.IsDir() {
			t.Errorf("%s/ missing: %v", d, err)
		}
	}
	var cfg map[string]any
	b, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	if err := json.Unmarshal(b, &cfg); err != nil || cfg["cache_ttl"] != float64(3600) {
		t.Errorf("config.json = %s, %v; want the init hook's default", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "images", chatPart, "cat.png")); string(b) != "\x89PNG\r\n\x1a\nfake" {
		t.Errorf("images/cat.png holds %q", b)
	}
	logs, _ := os.ReadDir(filepath.Join(dir, "logs", chatPart))
	if len(logs) != 1 {
		t.Fatalf("logs/ holds %d files, want 1", len(logs))
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "logs", chatPart, logs[0].Name())); string(b) != "first log line" {
		t.Errorf("log holds %q", b)
	}
	if _, err := os.Stat(filepath.Join(temp, "old.tmp")); err == nil {
		t.Error("old.tmp survived cleanup_temp_files(1)")
	}
	if _, err := os.Stat(filepath.Join(temp, "new.tmp")); err != nil {
		t.Errorf("new.tmp was deleted: %v", err)
	}
	for _, p := range []string{"/tmp/nekro_files_escape", "/tmp/nekro_files_abs_escape", filepath.Join(dir, "x"), filepath.Join(data, "plugins", "x")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was written outside images/", p)
		}
	}

	// The init hook keeps an operator's config.
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"cache_ttl": 60}`), 0o644)
	out = run(t, data, "data_dir.py", "")
	wantLines(t, out, `配置内容: {"cache_ttl": 60}`)

	// Another chat neither lists chat group_1's exports nor overwrites
	// its image by saving one under the same name.
	r := testutil.RunNekroExamples(t, []byte(`print(list_exports())
print(save_image(b"other chat", "cat.png"))`), "--data", data, "exec", "--chat", "group_2", "--user", "u2", "-")
	wantLines(t, r.Stdout, "暂无导出文件", "图片已保存: images/cat.png")
	testutil.MountVolumes(t, data)
	if b, _ := os.ReadFile(filepath.Join(dir, "images", chatPart, "cat.png")); string(b) != "\x89PNG\r\n\x1a\nfake" {
		t.Errorf("group_2 overwrote group_1's images/cat.png: %q", b)
	}
}

func TestSandboxFileExamples(t *testing.T) {
	data := testutil.DataDir(t)
	up := t.TempDir()
	notes := filepath.Join(up, "notes.txt")
	photo := filepath.Join(up, "photo.png")
	os.WriteFile(notes, []byte("uploaded notes"), 0o644)
	os.WriteFile(photo, []byte("\x89PNG\r\n\x1a\n0123456789"), 0o644)
	// Another chat's upload, which a planted symlink tries to reach.
	layout := files.Layout{Root: data}
	if err := os.MkdirAll(layout.UploadsDir("other"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(layout.UploadsDir("other"), "secret.txt"), []byte("other chat's secret"), 0o644)

	out := run(t, data, "sandbox_files.py", "", "--upload", notes, "--upload", photo)
	wantLines(t, out,
		"文件已处理并保存,大小: 14 字节",
		"图片 'photo.png' 处理成功。大小: 18 字节。",
		"uploaded notes",
		"upload read-only: 30",
		"written in the sandbox",
		"文件已处理并保存,大小: 22 字节",
		"处理图片失败,路径无效: path refused",
		"错误:文件 '/app/uploads/missing.png' 未找到。",
		"refused: /app/shared/passwd | ",
		"refused: /app/shared/uploads_dir/other/secret.txt | ",
		"refused: /etc/hostname | ",
		"refused: /app/shared/../uploads/notes.txt | ",
	)
	if strings.Contains(out, "read?") || strings.Contains(out, "root:") || strings.Contains(out, "other chat's secret") {
		t.Errorf("a planted path was read:\n%s", out)
	}
	m := regexp.MustCompile(`(/app/uploads/report_\d+\.txt)\nquarterly numbers: up\nreport read-only: (13|30)\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("generate_report: want its /app/uploads path, content and read-only; output:\n%s", out)
	}
	host := filepath.Join(layout.UploadsDir(chat), filepath.Base(m[1]))
	if b, err := os.ReadFile(host); err != nil || string(b) != "quarterly numbers: up" {
		t.Errorf("report on the host: %q, %v", b, err)
	}
	saved, _ := os.ReadDir(filepath.Join(pluginDir(data), "user_uploads", chatPart))
	var names []string
	for _, e := range saved {
		names = append(names, e.Name())
	}
	if len(names) != 2 || !strings.HasSuffix(names[0], "_made_by_code.txt") && !strings.HasSuffix(names[1], "_made_by_code.txt") {
		t.Errorf("user_uploads/ = %v, want notes.txt and made_by_code.txt copies", names)
	}
}

// fileServer serves a resource and a model and counts requests.
func fileServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var hits atomic.Int64
	model := make([]byte, 4096)
	for i := range model {
		model[i] = byte(i * 7)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/resource.txt", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "cached resource body")
	})
	mux.HandleFunc("/model.bin", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write(model)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &hits
}

func TestDownloadExamples(t *testing.T) {
	srv, hits := fileServer(t)
	t.Setenv(files.AllowPrivateEnv, "1") // the test server listens on 127.0.0.1
	data := testutil.DataDir(t)

	out := run(t, data, "downloads.py", srv.URL)
	wantLines(t, out,
		"资源已下载,大小: 20 字节",
		"已从缓存加载,大小: 20 字节",
		"下载失败: download "+srv.URL+"/missing: HTTP status 404 Not Found",
		"模型 'tiny' 下载成功,大小: 4096 字节",
		"模型已加载: tiny (版本 1.0.0,大小 4096 字节)",
		"模型 'absent' 不存在",
		"下载失败: ",
	)
	if !strings.Contains(out, "escape") || strings.Contains(out, "'../../escape' 下载成功") {
		t.Errorf("download_model with a hostile name: %s", out)
	}
	if n := hits.Load(); n != 3 {
		t.Errorf("server saw %d requests, want 3 (the cached resource once, the model twice)", n)
	}
	dir := pluginDir(data)
	sum := md5.Sum([]byte(srv.URL + "/resource.txt"))
	if b, err := os.ReadFile(filepath.Join(dir, "cache", hex.EncodeToString(sum[:])+".cache")); err != nil || string(b) != "cached resource body" {
		t.Errorf("cache file: %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "models", "tiny.model")); err != nil || fi.Size() != 4096 {
		t.Errorf("models/tiny.model: %v, %v", fi, err)
	}
	for _, d := range []string{"cache", "models"} {
		ents, _ := os.ReadDir(filepath.Join(dir, d))
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".partial-") {
				t.Errorf("%s/%s: a partial download was left behind", d, e.Name())
			}
		}
	}
	if _, err := os.Stat(filepath.Join(data, "escape.model")); err == nil {
		t.Error("download_model wrote outside models/")
	}
}

func TestDownloadsRefuseLoopbackByDefault(t *testing.T) {
	srv, hits := fileServer(t)
	t.Setenv(files.AllowPrivateEnv, "")
	data := testutil.DataDir(t)
	out := run(t, data, "ssrf.py", srv.URL)
	refusal := "refused to connect to 127.0.0.1: address is not public"
	if strings.Count(out, "下载失败: ") != 2 || strings.Count(out, refusal) != 2 || !strings.Contains(out, "模型 'tiny' 不存在") {
		t.Errorf("want two refusals naming 127.0.0.1 and no model; output:\n%s", out)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server on 127.0.0.1 was reached %d times", n)
	}
}
