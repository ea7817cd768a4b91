// Package python_test runs the plugin documents' Python examples, as the
// documents write them (plugins/; importtime/ for the one that works at
// import time), through nekro, and checks they give what the Go ports
// give for the same inputs (the Go ports' test snippets).
package python_test

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/testutil"
	"github.com/nekro-go/nekro/plugin"
)

func pngDecode(b []byte) (image.Image, error) { return png.Decode(bytes.NewReader(b)) }

// run executes a Go port's test snippet in chat as user, either with the
// Go port (goPlugin) or with the Python original (pyPlugin) enabled alone.
func run(t *testing.T, data, enable, chat, user, snippet string) string {
	t.Helper()
	args := []string{"--data", data, "--plugin-dir", "plugins", "--plugins", enable, "exec", "--chat", chat, "--user", user, snippet}
	r := testutil.RunNekroExamples(t, nil, args...)
	if r.Code != 0 {
		t.Fatalf("%s with %s in %s as %s: exit %d\n%s%s", filepath.Base(snippet), enable, chat, user, r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// Seed 000's KV examples: save_preference, get_preference, clear_cache,
// add_note and get_note give the same output from the document's Python
// and from the Go port, step by step, across two chats and two users.
func TestKVStoreExamplesMatchTheGoPort(t *testing.T) {
	const goPlugin, pyPlugin = "nekro_examples.kvstore", "nekro_docs.kvstore_doc"
	goData, pyData := testutil.DataDir(t), testutil.DataDir(t)
	steps := []struct{ chat, user, snippet string }{
		{"group_A", "U", "save_preference.py"},
		{"group_B", "U", "get_preference.py"},
		{"group_A", "V", "get_preference.py"},
		{"group_A", "U", "clear_cache.py"},
		{"group_A", "U", "add_note.py"},
		{"group_B", "U", "get_note.py"},
		{"group_A", "V", "get_note.py"},
	}
	for _, s := range steps {
		snippet := filepath.Join("..", "kvstore", "testdata", s.snippet)
		goOut := run(t, goData, goPlugin, s.chat, s.user, snippet)
		pyOut := run(t, pyData, pyPlugin, s.chat, s.user, snippet)
		if goOut != pyOut {
			t.Errorf("%s in %s as %s:\nGo port:\n%s\nthe document's Python:\n%s", s.snippet, s.chat, s.user, goOut, pyOut)
		}
	}
	// The values stored are the same too, as nekro kv reads them.
	for _, k := range [][]string{{"--chat", "group_A", "last_command"}, {"--user", "U", "preferences"}} {
		g := testutil.RunNekroExamples(t, nil, append([]string{"--data", goData, "kv", "--plugin", goPlugin, "get"}, k...)...)
		p := testutil.RunNekroExamples(t, nil, append([]string{"--data", pyData, "kv", "--plugin", pyPlugin, "get"}, k...)...)
		if g.Stdout != p.Stdout || g.Code != 0 {
			t.Errorf("kv get %v: Go port %q, Python %q", k, g.Stdout, p.Stdout)
		}
	}
}

// execResult is `nekro exec --json`'s answer.
type execResult struct {
	StopType    string          `json:"stop_type"`
	ExitCode    int             `json:"exit_code"`
	Output      string          `json:"output"`
	AgentMethod string          `json:"agent_method"`
	AgentResult json.RawMessage `json:"agent_result"`
}

func runJSON(t *testing.T, data, enable, code string) execResult {
	t.Helper()
	r := testutil.RunNekroExamples(t, []byte(code), "--data", data, "--plugin-dir", "plugins", "--plugins", enable,
		"exec", "--chat", "group_A", "--user", "U", "--json", "-")
	var res execResult
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("%s: %v\n%s%s", enable, err, r.Stdout, r.Stderr)
	}
	return res
}

// Seed 004's examples, one per method type: the document's Python and the
// Go ports end each run the same way with the same output, AGENT result
// and content parts (the picture: a 64 px PNG from both). Wrong argument
// types get the same TypeError. get_user_preference is left out on
// purpose: as the document writes it, it reads any user's preferences by
// an id the AI chooses; the Go port reads only the run's user.
func TestSandboxMethodExamplesMatchTheGoPort(t *testing.T) {
	goPlugins := "nekro_examples.sandbox_methods,nekro_examples.chat_message"
	const pyPlugin = "nekro_docs.sandbox_methods_doc"
	goData, pyData := testutil.DataDir(t), testutil.DataDir(t)
	snippets := []string{"sum.py", "sum_wrong_type.py", "get_time.py", "search_kb.py", "generate_image.py"}
	codes := map[string]string{"send_chat_message": `print(send_chat_message("任务已完成"))`}
	for _, s := range snippets {
		b, err := os.ReadFile(filepath.Join("..", "sandboxmethods", "testdata", s))
		if err != nil {
			t.Fatal(err)
		}
		codes[s] = string(b)
	}
	for name, code := range codes {
		g, p := runJSON(t, goData, goPlugins, code), runJSON(t, pyData, pyPlugin, code)
		// After an AGENT call the process exits by itself (8), or is
		// stopped when it has not within the host's short grace (-1 on a
		// busy machine): the stop type is the protocol's word, the exit
		// code only for runs that ended on their own.
		agentStop := g.StopType == "AGENT" || g.StopType == "MULTIMODAL_AGENT"
		if g.StopType != p.StopType || (!agentStop && g.ExitCode != p.ExitCode) || g.AgentMethod != p.AgentMethod {
			t.Errorf("%s: Go port %s/%d/%s, Python %s/%d/%s", name, g.StopType, g.ExitCode, g.AgentMethod, p.StopType, p.ExitCode, p.AgentMethod)
		}
		if name == "sum_wrong_type.py" {
			const want = "TypeError: my_sum_function(): argument 'num1' must be int, got str"
			if !strings.Contains(g.Output, want) || !strings.Contains(p.Output, want) {
				t.Errorf("%s: want %q from both:\nGo port:\n%s\nPython:\n%s", name, want, g.Output, p.Output)
			}
			continue
		}
		if g.Output != p.Output {
			t.Errorf("%s: output differs:\nGo port:\n%s\nPython:\n%s", name, g.Output, p.Output)
		}
		if name != "generate_image.py" {
			if string(g.AgentResult) != string(p.AgentResult) {
				t.Errorf("%s: agent result differs:\nGo port: %s\nPython:  %s", name, g.AgentResult, p.AgentResult)
			}
			continue
		}
		for who, raw := range map[string]json.RawMessage{"Go port": g.AgentResult, "Python": p.AgentResult} {
			var parts []plugin.ContentPart
			if err := json.Unmarshal(raw, &parts); err != nil || len(parts) != 2 || parts[0].Text != "这是一张关于 'sunset' 的图片。" {
				t.Fatalf("%s: parts %s: %v", who, raw, err)
			}
			b64, _ := strings.CutPrefix(parts[1].ImageURL.URL, "data:image/png;base64,")
			png, _ := base64.StdEncoding.DecodeString(b64)
			img, err := pngDecode(png)
			if err != nil || img.Bounds().Dx() != 64 {
				t.Errorf("%s: the picture is not a 64 px PNG: %v", who, err)
			}
		}
	}
}

// Seed 003's _ctx.fs examples: the Go port's test script (files2) run
// against the document's Python gives what the Go port's test demands of
// the Go port, in order.
func TestFileExamplesAnswerAsTheGoPort(t *testing.T) {
	img := []byte("\x89PNG\r\n\x1a\n-cat-")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/cat.png" {
			http.NotFound(w, r)
			return
		}
		w.Write(img)
	}))
	defer srv.Close()
	t.Setenv(files.AllowPrivateEnv, "1") // the test's server is on loopback
	data := testutil.DataDir(t)
	doc := filepath.Join(t.TempDir(), "doc.md")
	os.WriteFile(doc, []byte("# 标题\n正文"), 0o644)
	code, err := os.ReadFile(filepath.Join("..", "files2", "testdata", "fs_examples.py"))
	if err != nil {
		t.Fatal(err)
	}
	r := testutil.RunNekroExamples(t, []byte(strings.ReplaceAll(string(code), "{{URL}}", srv.URL)), "--data", data,
		"--plugin-dir", "plugins", "--plugins", "nekro_docs.fs_doc", "exec", "--chat", "group_9", "--upload", doc, "-")
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	rest := r.Stdout
	for _, w := range []string{
		"文件共 11 字符", "指定文件不存在", "文件共 7 字符",
		"refused: /etc/passwd", "refused: /app/shared/../../../etc/passwd", "refused: /app/sharedX/notes.txt",
		"报告已生成", "# Weekly\n\n- shipped the file bridge",
		"/app/shared/image.png " + strconv.Itoa(len(img)),
		"/app/shared/result.json {'score': 3, 'tags': ['a']}",
		"/app/shared/report.md # 报告内容",
		"removed: True",
	} {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("output lacks %q (in order):\n%s", w, r.Stdout)
		}
		rest = rest[i+len(w):]
	}
	if strings.Contains(r.Stdout, "analyzed?") {
		t.Errorf("a hostile path was analyzed:\n%s", r.Stdout)
	}
}

// The plugin data directory, path helper and Japanese-page examples
// (seeds 000, 001, 002). The Go port of 000/001's data directory part and
// of 002 is examples/files (nekro_examples.files); of the KV part and of
// the migrate_data and on_reset hooks, examples/kvstore.
//
// Where the Go port deliberately differs from the documents, the tests
// compare on the inputs both treat alike and map what must differ:
//   - the documents' methods join the AI's file names onto the plugin
//     directory unchecked (host trust, as in the reference): save_image
//     "../config.json" overwrites the plugin's config, download_model
//     "../../escape" writes beside the plugin's directory. The Go port
//     refuses such names. Those inputs of the Go port's snippets are left
//     out here (leaveOut names each);
//   - the Go port keeps a directory per chat in images/, logs/, exports/
//     and user_uploads/ (images/sandbox_group_1/cat.png); the documents
//     keep one for everyone (images/cat.png). pluginFiles folds the
//     per-chat level away, and the cross-chat part of the Go port's test
//     (another chat neither lists nor overwrites group_1's files) is left
//     out: in the documents' code it does both;
//   - the documents' messages name host paths (图片已保存: /…/data/plugins/
//     <key>/images/cat.png, 错误:文件在主机路径 '/…/uploads/…' 未找到); the Go
//     port names files relative to the plugin directory, or by their
//     sandbox path. The host paths are mapped before comparing;
//   - log and report names carry a timestamp: seconds in the documents,
//     nanoseconds for the Go port's logs. Both become <t>;
//   - errors are worded differently (requests' 404 message, the Python
//     API's Chinese path refusals): the lines are compared up to the
//     reason, and the reason checked on its own;
//   - the documents' downloads use requests, which fetches from any
//     address; the Go port refuses private addresses unless the operator
//     allows them (files.AllowPrivateEnv). The Go port's ssrf.py test has
//     no counterpart here.

const (
	goFiles   = "nekro_examples.files"
	goKV      = "nekro_examples.kvstore"
	pyDataDir = "nekro_docs.datadir_doc"
	pyPaths   = "nekro_docs.paths_doc"
	pyJa      = "nekro_docs.storage_doc_ja"
	pyMigrate = "nekro_docs.migrate_doc"
	chat1     = "group_1"
)

// The hostile inputs of the Go port's snippets, which the documents' code
// would carry out on the host (see above).
const (
	hostileImageNames = `for bad in ["../config.json", "../../../../../../../../tmp/nekro_files_escape", "/tmp/nekro_files_abs_escape", "sub/../../x"]:
    try:
        print("saved?", save_image(b"evil", bad))
    except Exception as e:
        print("refused:", bad, type(e).__name__)
`
	hostileExportName = `try:
    export_data("x", "../config.json")
except Exception as e:
    print("refused export:", type(e).__name__)
`
	hostileModelName = `print(download_model("{{URL}}/model.bin", "../../escape"))
`
)

// goPortSnippet reads a test snippet of a Go port, with {{URL}} replaced
// by url, less the fragments in leaveOut (each must be in it, so a changed
// snippet is noticed).
func goPortSnippet(t *testing.T, path, url string, leaveOut ...string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	code := string(b)
	for _, l := range leaveOut {
		if !strings.Contains(code, l) {
			t.Fatalf("%s no longer holds the left-out fragment:\n%s", path, l)
		}
		code = strings.Replace(code, l, "", 1)
	}
	return strings.ReplaceAll(code, "{{URL}}", url)
}

// execCode runs code in chat as user with the plugins enable, requires a
// normal end, and mounts data's volumes to let the test look at the
// plugins' files. It returns what the code printed.
func execCode(t *testing.T, data, enable, chat, user, code string, extra ...string) string {
	t.Helper()
	args := append([]string{"--data", data, "--plugin-dir", "plugins", "--plugins", enable,
		"exec", "--chat", chat, "--user", user}, extra...)
	r := testutil.RunNekroExamples(t, []byte(code), append(args, "-")...)
	testutil.MountVolumes(t, data)
	if r.Code != 0 {
		t.Fatalf("%s in %s: exit %d\n%s%s", enable, chat, r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// kvGet is `nekro kv --plugin key get ARGS`: the value and exit status.
func kvGet(t *testing.T, data, key string, args ...string) (string, int) {
	t.Helper()
	r := testutil.RunNekroExamples(t, nil, append([]string{"--data", data, "kv", "--plugin", key, "get"}, args...)...)
	return r.Stdout, r.Code
}

// kvSet is `nekro kv --plugin key set ARGS`, naming the plugins'
// directory: nekro kv accepts a Python plugin that stored nothing yet only
// when a --plugin-dir defines it.
func kvSet(t *testing.T, data, key string, args ...string) {
	t.Helper()
	r := testutil.RunNekroExamples(t, nil, append([]string{"--data", data, "--plugin-dir", "plugins", "kv", "--plugin", key, "set"}, args...)...)
	if r.Code != 0 {
		t.Fatalf("kv set %v: exit %d: %s", args, r.Code, r.Stderr)
	}
}

// inOrder checks that out holds each of want, in order.
func inOrder(t *testing.T, who, out string, want ...string) {
	t.Helper()
	rest := out
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Errorf("%s: output lacks %q (in order); output:\n%s", who, w, out)
			return
		}
		rest = rest[i+len(w):]
	}
}

// canonConfig rewrites the JSON after each "配置内容: " (read_config's
// answer) as canonical JSON: the Go port writes the default config's keys
// sorted, the document's json.dumps in its dict's order.
func canonConfig(t *testing.T, out string) string {
	t.Helper()
	const prefix = "配置内容: "
	var b strings.Builder
	for {
		i := strings.Index(out, prefix)
		if i < 0 {
			b.WriteString(out)
			return b.String()
		}
		b.WriteString(out[:i+len(prefix)])
		out = out[i+len(prefix):]
		dec := json.NewDecoder(strings.NewReader(out))
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("read_config answered no JSON: %v\n%s", err, out)
		}
		c, _ := json.Marshal(v)
		b.Write(c)
		out = out[dec.InputOffset():]
	}
}

var (
	timestamp = regexp.MustCompile(`\d{9,}`)
	// The Go port's per-chat directory level (sandbox_<chat>), folded away.
	chatLevel = regexp.MustCompile(`/sandbox_[^/]+`)
)

// pluginFiles is a plugin data directory's content: relative path ->
// file content ("<dir>" for a directory), the Go port's per-chat level
// folded away, timestamps in names as <t>, config.json as canonical JSON.
func pluginFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		if rel == "lost+found" { // the volume's
			return filepath.SkipDir
		}
		key := timestamp.ReplaceAllString(chatLevel.ReplaceAllString("/"+rel, ""), "<t>")[1:]
		if d.IsDir() {
			files[key] = "<dir>"
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if rel == "config.json" {
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Errorf("%s: %v", p, err)
			}
			b, _ = json.Marshal(v)
		}
		files[key] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// sameFiles reports the differences between the Go port's and the
// document's plugin directories.
func sameFiles(t *testing.T, what string, goFiles, pyFiles map[string]string) {
	t.Helper()
	for k, g := range goFiles {
		if p, ok := pyFiles[k]; !ok {
			t.Errorf("%s: %s is in the Go port's plugin directory only", what, k)
		} else if p != g {
			t.Errorf("%s: %s holds %q from the Go port, %q from the document's Python", what, k, g, p)
		}
	}
	for k := range pyFiles {
		if _, ok := goFiles[k]; !ok {
			t.Errorf("%s: %s is in the document's plugin directory only", what, k)
		}
	}
}

// plantTemp puts two files in the plugin's temp/, one three hours old,
// for cleanup_temp_files.
func plantTemp(t *testing.T, pluginDir string) {
	t.Helper()
	temp := filepath.Join(pluginDir, "temp")
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
}

// Seed 000's plugin directory examples (save_log, save_image, read_config,
// the init hook init_plugin_resources, list_exports, export_data,
// cleanup_temp_files) and its cleanup hook, on the Go port's data_dir.py
// less its hostile names: the same answers, and the same files in the
// plugin's directory, config.json included.
func TestDataDirExamplesMatchTheGoPort(t *testing.T) {
	goData, pyData := testutil.DataDir(t), testutil.DataDir(t)
	goDir, pyDir := filepath.Join(goData, "plugins", goFiles), filepath.Join(pyData, "plugins", pyDataDir)
	plantTemp(t, goDir)
	plantTemp(t, pyDir)
	code := goPortSnippet(t, filepath.Join("..", "files", "testdata", "data_dir.py"), "", hostileImageNames, hostileExportName)

	goOut := execCode(t, goData, goFiles, chat1, "u1", code)
	pyOut := execCode(t, pyData, pyDataDir, chat1, "u1", code)
	// The document answers with the image's host path.
	if !strings.Contains(pyOut, "图片已保存: "+pyDir+"/images/cat.png\n") {
		t.Errorf("save_image: want the document's host path %s/images/cat.png:\n%s", pyDir, pyOut)
	}
	norm := func(out string) string {
		out = strings.ReplaceAll(out, pyDir+"/", "")
		return timestamp.ReplaceAllString(canonConfig(t, out), "<t>")
	}
	g, p := norm(goOut), norm(pyOut)
	if g != p {
		t.Errorf("data_dir.py: the answers differ\nGo port:\n%s\nthe document's Python:\n%s", goOut, pyOut)
	}
	inOrder(t, "Go port", g, `配置内容: {"cache_ttl":3600,"enabled":true,"version":"1.0.0"}`,
		"日志已保存到 log_<t>.txt", "图片已保存: images/cat.png", "暂无导出文件",
		"数据已导出: /app/shared/table.csv", "a,b\n1,2\n", "导出文件列表:\n- table.csv",
		"清理完成,删除了 1 个文件", "清理完成,删除了 0 个文件")

	// The files: the init hook's directories and config.json, the log, the
	// image, the export. In temp/, cleanup_temp_files(1) deleted old.tmp
	// in both (1, then 0 deleted); the document's cleanup hook then emptied
	// temp/ when nekro shut the plugin down, where the Go port, which has
	// no cleanup hook, keeps new.tmp.
	goF, pyF := pluginFiles(t, goDir), pluginFiles(t, pyDir)
	if goF["temp/new.tmp"] != "new.tmp" {
		t.Errorf("the Go port's temp/ lost new.tmp: %v", goF)
	}
	if _, ok := pyF["temp/new.tmp"]; ok {
		t.Error("the document's cleanup hook did not empty temp/ at shutdown")
	}
	delete(goF, "temp/new.tmp")
	sameFiles(t, "after data_dir.py", goF, pyF)
	for k, want := range map[string]string{
		"config.json": `{"cache_ttl":3600,"enabled":true,"version":"1.0.0"}`, "logs/log_<t>.txt": "first log line",
		"images/cat.png": "\x89PNG\r\n\x1a\nfake", "exports/table.csv": "a,b\n1,2\n",
		"cache": "<dir>", "models": "<dir>", "user_uploads": "<dir>", "temp": "<dir>",
	} {
		if pyF[k] != want {
			t.Errorf("the document's plugin directory: %s holds %q, want %q", k, pyF[k], want)
		}
	}

	// The init hook keeps an operator's config, in both.
	for _, dir := range []string{goDir, pyDir} {
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"cache_ttl": 60}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goOut = execCode(t, goData, goFiles, chat1, "u1", code)
	pyOut = execCode(t, pyData, pyDataDir, chat1, "u1", code)
	inOrder(t, "the document's Python", pyOut, `配置内容: {"cache_ttl": 60}`, "导出文件列表:\n- table.csv")
	if g, p := norm(goOut), norm(pyOut); g != p {
		t.Errorf("data_dir.py again: the answers differ\nGo port:\n%s\nthe document's Python:\n%s", goOut, pyOut)
	}
}

// fileServer serves the Go port's test resources and counts requests.
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

var downloadFailure = regexp.MustCompile(`(下载失败|ダウンロードに失敗しました): .*`)

// modelInfo reads download_model's KV record of model name.
func modelInfo(t *testing.T, data, key, name string) map[string]any {
	t.Helper()
	out, code := kvGet(t, data, key, "model_info:"+name)
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); code != 0 || err != nil {
		t.Fatalf("%s: kv get model_info:%s: exit %d, %v: %q", key, name, code, err, out)
	}
	return m
}

// checkModelInfo compares the model's KV metadata, created_at aside, and
// checks created_at is a time of this test.
func checkModelInfo(t *testing.T, goData, pyData, pyKey string, since time.Time) {
	t.Helper()
	g, p := modelInfo(t, goData, goFiles, "tiny"), modelInfo(t, pyData, pyKey, "tiny")
	for _, m := range []map[string]any{g, p} {
		at, _ := m["created_at"].(float64)
		if at < float64(since.Unix()) || at > float64(time.Now().Unix()+1) {
			t.Errorf("model_info:tiny created_at = %v, not a time of this test", m["created_at"])
		}
		delete(m, "created_at")
	}
	want := map[string]any{"name": "tiny", "version": "1.0.0", "file_path": "models/tiny.model", "size_bytes": float64(4096)}
	if !reflect.DeepEqual(g, want) || !reflect.DeepEqual(p, want) {
		t.Errorf("model_info:tiny in KV: Go port %v, the document's Python %v; want %v", g, p, want)
	}
}

// Seed 000's cache_external_resource and download_model/load_model, on
// the Go port's downloads.py less its hostile model name, from a local
// server: the same answers, requests, cached and model files, and model
// metadata in KV.
func TestDownloadExamplesMatchTheGoPort(t *testing.T) {
	srv, hits := fileServer(t)
	t.Setenv(files.AllowPrivateEnv, "1") // for the Go port: the test's server is on loopback
	since := time.Now()
	goData, pyData := testutil.DataDir(t), testutil.DataDir(t)
	code := goPortSnippet(t, filepath.Join("..", "files", "testdata", "downloads.py"), srv.URL, hostileModelName)

	goOut := execCode(t, goData, goFiles, chat1, "u1", code)
	goHits := hits.Swap(0)
	pyOut := execCode(t, pyData, pyDataDir, chat1, "u1", code)
	pyHits := hits.Load()
	for who, out := range map[string]string{"Go port": goOut, "the document's Python": pyOut} {
		if f := downloadFailure.FindString(out); !strings.Contains(f, "404") {
			t.Errorf("%s: the missing resource's failure does not say 404: %q", who, f)
		}
	}
	norm := func(out string) string { return downloadFailure.ReplaceAllString(out, "$1: <reason>") }
	if norm(goOut) != norm(pyOut) {
		t.Errorf("downloads.py: the answers differ\nGo port:\n%s\nthe document's Python:\n%s", goOut, pyOut)
	}
	inOrder(t, "the document's Python", pyOut, "资源已下载,大小: 20 字节", "已从缓存加载,大小: 20 字节", "下载失败: ",
		"模型 'tiny' 下载成功,大小: 4096 字节", "模型已加载: tiny (版本 1.0.0,大小 4096 字节)", "模型 'absent' 不存在")
	if goHits != 2 || pyHits != 2 {
		t.Errorf("the server saw %d requests from the Go port, %d from the document's Python; want 2 each (the cached resource once, the model once)", goHits, pyHits)
	}

	goF, pyF := pluginFiles(t, filepath.Join(goData, "plugins", goFiles)), pluginFiles(t, filepath.Join(pyData, "plugins", pyDataDir))
	sameFiles(t, "after downloads.py", goF, pyF)
	sum := md5.Sum([]byte(srv.URL + "/resource.txt"))
	// The key as pluginFiles folds it: an md5 in hex holds a run of nine
	// or more decimal digits about one time in seven (the server's port
	// varies), which the timestamp pattern folds too.
	cacheKey := timestamp.ReplaceAllString("cache/"+hex.EncodeToString(sum[:])+".cache", "<t>")
	if c := pyF[cacheKey]; c != "cached resource body" {
		t.Errorf("the document's cache file holds %q", c)
	}
	if len(pyF["models/tiny.model"]) != 4096 {
		t.Errorf("the document's models/tiny.model has %d bytes", len(pyF["models/tiny.model"]))
	}
	checkModelInfo(t, goData, pyData, pyDataDir, since)
}

// Seed 002's process_image, generate_report and get_file_content, and seed
// 000's process_user_file, on the Go port's sandbox_files.py, whole: its
// hostile sandbox paths ("..", symlinks planted by the code, /etc) are
// refused by the Python API's path helpers as by the Go port (the
// reference's are lexical and would follow them). The same answers, the
// report in the chat's uploads, the same copies in user_uploads/.
func TestPathExamplesMatchTheGoPort(t *testing.T) {
	up := t.TempDir()
	notes, photo := filepath.Join(up, "notes.txt"), filepath.Join(up, "photo.png")
	os.WriteFile(notes, []byte("uploaded notes"), 0o644)
	os.WriteFile(photo, []byte("\x89PNG\r\n\x1a\n0123456789"), 0o644)
	goData, pyData := testutil.DataDir(t), testutil.DataDir(t)
	for _, data := range []string{goData, pyData} {
		// Another chat's upload, which a planted symlink tries to reach.
		other := files.Layout{Root: data}.UploadsDir("other")
		if err := os.MkdirAll(other, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(other, "secret.txt"), []byte("other chat's secret"), 0o644)
	}
	code := goPortSnippet(t, filepath.Join("..", "files", "testdata", "sandbox_files.py"), "")
	goOut := execCode(t, goData, goFiles, chat1, "u1", code, "--upload", notes, "--upload", photo)
	pyOut := execCode(t, pyData, pyDataDir+","+pyPaths, chat1, "u1", code, "--upload", notes, "--upload", photo)

	pyUploads := files.Layout{Root: pyData}.UploadsDir(chat1)
	// The document names the missing file by its host path, the Go port by
	// its sandbox path.
	missing := "错误:文件在主机路径 '" + pyUploads + "/missing.png' 未找到。可能是路径转换错误或文件确实不存在。"
	if !strings.Contains(pyOut, missing) {
		t.Errorf("process_image of a missing file: want %q from the document's Python:\n%s", missing, pyOut)
	}
	rules := []struct{ re, to string }{
		{`处理图片失败,路径无效: .*`, "处理图片失败,路径无效: <reason>"},
		{`(?m)^(refused: \S+ \|) .*`, "$1 <reason>"},
		{`report_\d+\.txt`, "report_<t>.txt"},
		{`report read-only: (13|30)\n`, "report read-only: <EACCES or EROFS>\n"},
	}
	norm := func(out string) string {
		out = strings.ReplaceAll(out, missing, "错误:文件 '/app/uploads/missing.png' 未找到。")
		for _, r := range rules {
			out = regexp.MustCompile(r.re).ReplaceAllString(out, r.to)
		}
		return out
	}
	if norm(goOut) != norm(pyOut) {
		t.Errorf("sandbox_files.py: the answers differ\nGo port:\n%s\nthe document's Python:\n%s", goOut, pyOut)
	}
	inOrder(t, "the document's Python", norm(pyOut),
		"文件已处理并保存,大小: 14 字节", "图片 'photo.png' 处理成功。大小: 18 字节。", "uploaded notes",
		"written in the sandbox", "文件已处理并保存,大小: 22 字节", "处理图片失败,路径无效: <reason>",
		"refused: /app/shared/passwd | <reason>", "refused: /app/shared/uploads_dir/other/secret.txt | <reason>",
		"refused: /etc/hostname | <reason>", "refused: /app/shared/../uploads/notes.txt | <reason>",
		"/app/uploads/report_<t>.txt\nquarterly numbers: up\nreport read-only: <EACCES or EROFS>\n")
	if strings.Contains(pyOut, "read?") || strings.Contains(pyOut, "root:") || strings.Contains(pyOut, "other chat's secret") {
		t.Errorf("the document's Python read a planted path:\n%s", pyOut)
	}

	// generate_report wrote the report into the chat's uploads.
	m := regexp.MustCompile(`/app/uploads/(report_\d+\.txt)\n`).FindStringSubmatch(pyOut)
	if m == nil {
		t.Fatalf("generate_report returned no /app/uploads path:\n%s", pyOut)
	}
	if b, err := os.ReadFile(filepath.Join(pyUploads, m[1])); err != nil || string(b) != "quarterly numbers: up" {
		t.Errorf("the report in the chat's uploads: %q, %v", b, err)
	}
	// process_user_file copied both files into user_uploads/.
	goF, pyF := pluginFiles(t, filepath.Join(goData, "plugins", goFiles)), pluginFiles(t, filepath.Join(pyData, "plugins", pyDataDir))
	sameFiles(t, "after sandbox_files.py", goF, pyF)
	if pyF["user_uploads/<t>_notes.txt"] != "uploaded notes" || pyF["user_uploads/<t>_made_by_code.txt"] != "written in the sandbox" {
		t.Errorf("user_uploads/ of the document's Python: %v", pyF)
	}
}

// The document's on_reset hook (seed 000's best practices) and the Go
// port's: `nekro chats reset` drops the reset chat's temp_cache only.
func TestOnResetHookMatchesTheGoPort(t *testing.T) {
	for _, p := range []struct{ key, data string }{{goKV, testutil.DataDir(t)}, {pyDataDir, testutil.DataDir(t)}} {
		execCode(t, p.data, p.key, chat1, "u1", `print("ok")`) // nekro's database, and the plugin's start
		kvSet(t, p.data, p.key, "--chat", chat1, "temp_cache", "a")
		kvSet(t, p.data, p.key, "--chat", "group_2", "temp_cache", "b")
		r := testutil.RunNekroExamples(t, nil, "--data", p.data, "--plugin-dir", "plugins", "--plugins", p.key, "chats", "reset", chat1)
		if r.Code != 0 {
			t.Fatalf("%s: chats reset: exit %d: %s", p.key, r.Code, r.Stderr)
		}
		if out, code := kvGet(t, p.data, p.key, "--chat", chat1, "temp_cache"); code != 1 {
			t.Errorf("%s: on_reset left %s's temp_cache: %q", p.key, chat1, out)
		}
		if out, _ := kvGet(t, p.data, p.key, "--chat", "group_2", "temp_cache"); out != "b\n" {
			t.Errorf("%s: resetting %s touched group_2's temp_cache: %q", p.key, chat1, out)
		}
	}
}

// Seed 000's migrate_data init hook (its own plugin, migrate_doc.py) and
// the Go port's: data_version is 2.0.0 after the first start, old data is
// migrated at the next start, newer data is left alone, and the hook's log
// lines (core.logger.success included) reach nekro's log.
func TestMigrateDataMatchesTheGoPort(t *testing.T) {
	for _, key := range []string{goKV, pyMigrate} {
		data := testutil.DataDir(t)
		start := func() string {
			t.Helper()
			r := testutil.RunNekroExamples(t, []byte(`print("ok")`), "--data", data, "--log-level", "info", "--plugin-dir", "plugins",
				"--plugins", key, "exec", "--chat", chat1, "--user", "u1", "-")
			if r.Code != 0 || r.Stdout != "ok\n" {
				t.Fatalf("%s: exit %d: %s%s", key, r.Code, r.Stdout, r.Stderr)
			}
			return r.Stderr
		}
		for _, step := range []struct{ before, after string }{{"", "2.0.0"}, {"1.5.0", "2.0.0"}, {"2.1.0", "2.1.0"}} {
			if step.before != "" {
				kvSet(t, data, key, "data_version", step.before)
			}
			log := start()
			migrated := strings.Contains(log, "检测到旧版本数据,开始迁移...") && strings.Contains(log, "数据迁移完成")
			if migrated != (step.before != step.after) {
				t.Errorf("%s from %q: migration logged: %v; log:\n%s", key, step.before, migrated, log)
			}
			if out, _ := kvGet(t, data, key, "data_version"); out != step.after+"\n" {
				t.Errorf("%s from %q: data_version = %q, want %s", key, step.before, out, step.after)
			}
		}
	}
}

// The documents' 获取插件目录 / プラグインディレクトリの取得 fragments call
// get_plugin_path() and get_plugin_data_dir() at the plugin's top level,
// as the reference allows: the plugin loads, and logs its directory,
// data/plugins/<author>.<module>. The plugin is in importtime/, not
// plugins/: nekro imports every plugin of a --plugin-dir, and one that
// does not load would be an error in the log of every other test's run.
func TestPluginDirAtImportTime(t *testing.T) {
	data := testutil.DataDir(t)
	r := testutil.RunNekroExamples(t, []byte(`print("ok")`), "--data", data, "--log-level", "info", "--plugin-dir", "importtime",
		"--plugins", "nekro_docs.plugindir_doc", "exec", "--chat", chat1, "-")
	if r.Code != 0 {
		t.Fatalf("exit %d:\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	dir := filepath.Join(data, "plugins", "nekro_docs.plugindir_doc")
	for _, w := range []string{"插件数据目录: " + dir, "プラグインデータディレクトリ: " + dir} {
		if !strings.Contains(r.Stderr, w) {
			t.Errorf("the log lacks %q:\n%s", w, r.Stderr)
		}
	}
}

// Seed 001, the Japanese page (KV part, then the plugin directory through
// get_plugin_data_dir()), on the Go ports' inputs (the hostile names left
// out as above): the page's Japanese answers, and the same effects as the
// Go ports: values in KV as `nekro kv` reads them, files in the plugin's
// directory. (The page has no cleanup hook: temp/new.tmp stays, as with
// the Go port.)
func TestJapanesePageExamples(t *testing.T) {
	srv, _ := fileServer(t)
	t.Setenv(files.AllowPrivateEnv, "1") // for the Go port: the test's server is on loopback
	since := time.Now()
	goData, pyData := testutil.DataDir(t), testutil.DataDir(t)

	// 方法1: the KV examples, step by step as the KV test above.
	kvSteps := []struct{ chat, user, snippet, want string }{
		{"group_A", "U", "save_preference.py", "設定が保存されました\n設定: {'theme': 'dark', 'notifications': True}\n"},
		{"group_B", "U", "get_preference.py", "設定: {'theme': 'dark', 'notifications': True}\n"},
		{"group_A", "V", "get_preference.py", "設定: {'theme': 'light', 'notifications': False}\n"},
		{"group_A", "U", "clear_cache.py", "キャッシュがクリアされました\n"},
		{"group_A", "U", "add_note.py", "メモ 'Shopping' が追加されました、ID: n1\nタイトル: Shopping\n内容: milk, eggs\nタグ: home, urgent\nID 'n2' のメモが見つかりません\n"},
		{"group_B", "U", "get_note.py", "タイトル: Shopping\n内容: milk, eggs\nタグ: home, urgent\n"},
		{"group_A", "V", "get_note.py", "ユーザーにメモがありません\n"},
	}
	for _, s := range kvSteps {
		if s.snippet == "clear_cache.py" { // something for clear_cache to delete, and to keep
			for _, p := range []struct{ data, key string }{{goData, goKV}, {pyData, pyJa}} {
				kvSet(t, p.data, p.key, "--chat", "group_A", "session_cache_data", "cached")
				kvSet(t, p.data, p.key, "--chat", "group_B", "session_cache_data", "cached")
				kvSet(t, p.data, p.key, "--user", "U", "old_setting", "x")
				kvSet(t, p.data, p.key, "--user", "V", "old_setting", "x")
			}
		}
		snippet := filepath.Join("..", "kvstore", "testdata", s.snippet)
		run(t, goData, goKV, s.chat, s.user, snippet)
		if out := run(t, pyData, pyJa, s.chat, s.user, snippet); out != s.want {
			t.Errorf("%s in %s as %s: the page's Python answered\n%s\nwant\n%s", s.snippet, s.chat, s.user, out, s.want)
		}
	}
	for _, k := range [][]string{
		{"--chat", "group_A", "last_command"}, {"--user", "U", "preferences"},
		{"--chat", "group_A", "session_cache_data"}, {"--chat", "group_B", "session_cache_data"},
		{"--user", "U", "old_setting"}, {"--user", "V", "old_setting"}, {"--user", "V", "all_notes"},
	} {
		g, gc := kvGet(t, goData, goKV, k...)
		p, pc := kvGet(t, pyData, pyJa, k...)
		if g != p || gc != pc {
			t.Errorf("kv get %v: Go port %q (exit %d), the page's Python %q (exit %d)", k, g, gc, p, pc)
		}
	}
	notes := func(data, key string) map[string]any {
		out, code := kvGet(t, data, key, "--user", "U", "all_notes")
		var v map[string]any
		if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil {
			t.Fatalf("%s: all_notes of U: exit %d, %v: %q", key, code, err, out)
		}
		n1, _ := v["notes"].(map[string]any)["n1"].(map[string]any)
		delete(n1, "created_at")
		return v
	}
	if g, p := notes(goData, goKV), notes(pyData, pyJa); !reflect.DeepEqual(g, p) {
		t.Errorf("all_notes of U: Go port %v, the page's Python %v", g, p)
	}

	// 方法2: the plugin directory.
	goDir, pyDir := filepath.Join(goData, "plugins", goFiles), filepath.Join(pyData, "plugins", pyJa)
	plantTemp(t, goDir)
	plantTemp(t, pyDir)
	code := goPortSnippet(t, filepath.Join("..", "files", "testdata", "data_dir.py"), "", hostileImageNames, hostileExportName)
	execCode(t, goData, goFiles, chat1, "u1", code)
	out := execCode(t, pyData, pyJa, chat1, "u1", code)
	inOrder(t, "data_dir.py, the page's Python", timestamp.ReplaceAllString(strings.ReplaceAll(out, pyDir, "<plugin dir>"), "<t>"),
		"設定内容: {", // (the page's read_config says 設定内容, seed 000's 配置内容)
		"ログが log_<t>.txt に保存されました", "画像が保存されました: <plugin dir>/images/cat.png",
		"利用可能なエクスポートファイルがありません", "データがエクスポートされました: /app/shared/table.csv",
		"a,b\n1,2\n", "エクスポートファイルリスト:\n- table.csv",
		"クリーンアップが完了し、1個のファイルを削除しました", "クリーンアップが完了し、0個のファイルを削除しました")
	if cfg := strings.Index(out, "設定内容: "); cfg >= 0 {
		var v map[string]any
		json.NewDecoder(strings.NewReader(out[cfg+len("設定内容: "):])).Decode(&v)
		if !reflect.DeepEqual(v, map[string]any{"version": "1.0.0", "enabled": true, "cache_ttl": float64(3600)}) {
			t.Errorf("read_config: the page's Python read %v, not the init hook's default", v)
		}
	}

	code = goPortSnippet(t, filepath.Join("..", "files", "testdata", "downloads.py"), srv.URL, hostileModelName)
	execCode(t, goData, goFiles, chat1, "u1", code)
	out = execCode(t, pyData, pyJa, chat1, "u1", code)
	inOrder(t, "downloads.py, the page's Python", out,
		"リソースがダウンロードされました、サイズ: 20 バイト", "キャッシュから読み込み、サイズ: 20 バイト",
		"ダウンロードに失敗しました: 404 ", "モデル 'tiny' が正常にダウンロードされました、サイズ: 4096 バイト",
		// The page's load_model answers with the model's host path (seed
		// 000's with its version and size).
		"モデル 'tiny' が正常にロードされました、パス: "+pyDir+"/models/tiny.model\n",
		"モデル 'absent' は存在しません")
	checkModelInfo(t, goData, pyData, pyJa, since)

	up := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(up, []byte("uploaded notes"), 0o644)
	code = `print(process_user_file("/app/uploads/notes.txt"))` // sandbox_files.py's first line
	execCode(t, goData, goFiles, chat1, "u1", code, "--upload", up)
	out = execCode(t, pyData, pyJa, chat1, "u1", code, "--upload", up)
	inOrder(t, "process_user_file, the page's Python", out, "ファイルが処理され保存されました、サイズ: 14 バイト")

	sameFiles(t, "the Japanese page", pluginFiles(t, goDir), pluginFiles(t, pyDir))
}
