// Package python_test runs the plugin documents' Python examples, as the
// documents write them (plugins/), through nekro, and checks they give
// what the Go ports give for the same inputs (the Go ports' test
// snippets).
package python_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

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
	r := testutil.RunNekro(t, nil, args...)
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
		g := testutil.RunNekro(t, nil, append([]string{"--data", goData, "kv", "--plugin", goPlugin, "get"}, k...)...)
		p := testutil.RunNekro(t, nil, append([]string{"--data", pyData, "kv", "--plugin", pyPlugin, "get"}, k...)...)
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
	r := testutil.RunNekro(t, []byte(code), "--data", data, "--plugin-dir", "plugins", "--plugins", enable,
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
		if g.StopType != p.StopType || g.ExitCode != p.ExitCode || g.AgentMethod != p.AgentMethod {
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
	r := testutil.RunNekro(t, []byte(strings.ReplaceAll(string(code), "{{URL}}", srv.URL)), "--data", data,
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
