package files2_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/testutil"
)

// The seed-003 examples run in the nekro-files2 binary (this plugin
// instead of examples/files, whose generate_report has the same Python
// name), built into bin/test/ as the nekro binary is.

func nekro(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	bin := testutil.Binary(t, "./examples/files2/nekro-files2")
	cmd := exec.Command(bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("nekro-files2 %v: %v\n%s%s", args, err, out.String(), errb.String())
	}
	return out.String()
}

func TestSeed003Examples(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n-cat-")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/cat.png" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		w.Write(png)
	}))
	defer srv.Close()
	t.Setenv(files.AllowPrivateEnv, "1")
	data := testutil.DataDir(t)
	doc := filepath.Join(t.TempDir(), "doc.md")
	os.WriteFile(doc, []byte("# 标题\n正文"), 0o644)

	code, err := os.ReadFile(filepath.Join("testdata", "fs_examples.py"))
	if err != nil {
		t.Fatal(err)
	}
	stdout := nekro(t, strings.ReplaceAll(string(code), "{{URL}}", srv.URL),
		"--data", data, "exec", "--chat", "group_9", "--json", "--upload", doc, "-")
	var res struct {
		StopType string `json:"stop_type"`
		Output   string `json:"output"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.StopType != "NORMAL" {
		t.Fatalf("run: %v %+v\n%s", err, res, stdout)
	}
	want := []string{
		"文件共 11 字符",
		"指定文件不存在",
		"文件共 7 字符",
		"refused: /etc/passwd",
		"refused: /app/shared/../../../etc/passwd",
		"refused: /app/sharedX/notes.txt",
		"报告已生成",
		"# Weekly\n\n- shipped the file bridge",
		"/app/shared/image.png " + strconv.Itoa(len(png)),
		"/app/shared/result.json {'score': 3, 'tags': ['a']}",
		"/app/shared/report.md # 报告内容",
		"removed: True",
	}
	rest := res.Output
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("output lacks %q (in order):\n%s", w, res.Output)
		}
		rest = rest[i+len(w):]
	}
	if strings.Contains(res.Output, "analyzed?") {
		t.Errorf("a hostile path was analyzed:\n%s", res.Output)
	}
}

// Both generate_report versions exist, each in its own binary.
func TestGenerateReportVersionsCoexist(t *testing.T) {
	out := nekro(t, "", "plugins")
	if !strings.Contains(out, "nekro_examples.files2") || strings.Contains(out, "nekro_examples.files ") ||
		!strings.Contains(out, "generate_report(title: str, content: str)") {
		t.Errorf("nekro-files2 plugins:\n%s", out)
	}
	r := testutil.RunNekroExamples(t, nil, "plugins")
	if !strings.Contains(r.Stdout, "generate_report(report_data: str)") || strings.Contains(r.Stdout, "nekro_examples.files2") {
		t.Errorf("nekro plugins:\n%s", r.Stdout)
	}
}
