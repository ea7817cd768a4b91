package sandboxmethods_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/testutil"
	"github.com/nekro-go/nekro/plugin"
)

// The seed-004 examples, driven by Python snippets through `nekro exec`:
// the same binary and sandbox the AI's code uses.

type execJSON struct {
	StopType    string          `json:"stop_type"`
	ExitCode    int             `json:"exit_code"`
	Output      string          `json:"output"`
	AgentMethod string          `json:"agent_method"`
	AgentResult json.RawMessage `json:"agent_result"`
	Calls       []struct {
		Method string `json:"method"`
		Error  string `json:"error"`
	} `json:"calls"`
}

func exec(t *testing.T, data, snippet string) (execJSON, testutil.Result) {
	t.Helper()
	r := testutil.RunNekroExamples(t, nil, "--data", data, "exec", "--chat", "group_1", "--user", "u1", "--json",
		filepath.Join("testdata", snippet))
	var res execJSON
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("%s: %v\nstdout %s\nstderr %s", snippet, err, r.Stdout, r.Stderr)
	}
	return res, r
}

func TestSeedExamples(t *testing.T) {
	data := testutil.DataDir(t)

	res, r := exec(t, data, "sum.py")
	if res.StopType != "NORMAL" || res.Output != "5\n" || r.Code != 0 {
		t.Errorf("sum.py: %+v exit %d", res, r.Code)
	}

	res, r = exec(t, data, "sum_wrong_type.py")
	if res.StopType != "ERROR" || r.Code != 1 || !strings.Contains(res.Output, "TypeError: my_sum_function(): argument 'num1' must be int, got str") {
		t.Errorf("sum_wrong_type.py: %+v exit %d", res, r.Code)
	}

	res, _ = exec(t, data, "get_time.py")
	if strings.TrimSpace(res.Output) != strconv.Itoa(time.Now().UTC().Year()) {
		t.Errorf("get_time.py: %q", res.Output)
	}

	res, r = exec(t, data, "search_kb.py")
	var kb string
	json.Unmarshal(res.AgentResult, &kb)
	if res.StopType != "AGENT" || r.Code != 8 || strings.Contains(res.Output, "must not run") ||
		!strings.Contains(kb, "- Timeouts:") || !strings.Contains(kb, "- Sandbox:") || res.AgentMethod != "search_kb" {
		t.Errorf("search_kb.py: %+v exit %d", res, r.Code)
	}

	res, r = exec(t, data, "generate_image.py")
	var parts []plugin.ContentPart
	if err := json.Unmarshal(res.AgentResult, &parts); err != nil || len(parts) != 2 {
		t.Fatalf("generate_image.py parts %s: %v", res.AgentResult, err)
	}
	if res.StopType != "MULTIMODAL_AGENT" || r.Code != 11 || strings.Contains(res.Output, "must not run") ||
		parts[0].Text != "这是一张关于 'sunset' 的图片。" {
		t.Errorf("generate_image.py: %+v exit %d", res, r.Code)
	}
	b64, ok := strings.CutPrefix(parts[1].ImageURL.URL, "data:image/png;base64,")
	raw, err := base64.StdEncoding.DecodeString(b64)
	if !ok || err != nil {
		t.Fatalf("image url %.60s: %v", parts[1].ImageURL.URL, err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil || img.Bounds().Dx() != 64 {
		t.Errorf("image is not a 64px PNG: %v", err)
	}
}

func TestExecCommandLine(t *testing.T) {
	data := testutil.DataDir(t)
	// Code from stdin, plain output, exit status is the stop type.
	r := testutil.RunNekroExamples(t, []byte("print(my_sum_function(num1=40, num2=2))"), "--data", data, "exec", "--chat", "c", "-")
	if r.Code != 0 || r.Stdout != "42\n" {
		t.Errorf("stdin run: %+v", r)
	}
	r = testutil.RunNekroExamples(t, []byte("while True: pass"), "--data", data, "exec", "--chat", "c", "--timeout", "1s", "-")
	if r.Code != 2 || !strings.Contains(r.Stdout, "time limit") {
		t.Errorf("timeout run: %+v", r)
	}
	// --upload puts the file at /app/uploads/<name>, readable, not writable.
	up := filepath.Join(t.TempDir(), "notes.txt")
	writeFile(t, up, "uploaded text")
	r = testutil.RunNekroExamples(t, []byte(`
print(open("/app/uploads/notes.txt").read())
try:
    open("/app/uploads/notes.txt", "w")
except OSError as e:
    print("read-only:", e.errno)
`), "--data", data, "exec", "--chat", "c", "--upload", up, "-")
	if r.Code != 0 || !strings.Contains(r.Stdout, "uploaded text") || !strings.Contains(r.Stdout, "read-only: 30") {
		t.Errorf("upload run: %+v", r)
	}
	// Missing --chat is a usage error.
	r = testutil.RunNekroExamples(t, []byte("pass"), "--data", data, "exec", "-")
	if r.Code == 0 || !strings.Contains(r.Stderr, `required flag(s) "chat" not set`) {
		t.Errorf("missing --chat: %+v", r)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Killing the host (SIGKILL, no cleanup) takes its sandboxes with it, and
// the next start clears the dead process's run directories.
func TestSandboxDiesWithAKilledHost(t *testing.T) {
	data := testutil.DataDir(t)
	marker := "nekro-host-kill-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	cmd := osexec.Command(testutil.NekroExamples(t), "--data", data, "exec", "--chat", "c", "-")
	cmd.Stdin = strings.NewReader("import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', '" + marker + "'])\ntime.sleep(300)")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	running := func() bool {
		out, _ := osexec.Command("pgrep", "-f", marker).Output()
		return len(strings.TrimSpace(string(out))) > 0
	}
	deadline := time.Now().Add(10 * time.Second)
	for !running() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !running() {
		t.Fatal("the sandboxed process never started")
	}
	cmd.Process.Kill()
	cmd.Wait()
	deadline = time.Now().Add(3 * time.Second)
	for running() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if running() {
		osexec.Command("pkill", "-f", marker).Run()
		t.Fatal("sandbox processes outlived the killed host")
	}
	runs, _ := os.ReadDir(filepath.Join(data, "runs"))
	if len(runs) != 1 {
		t.Fatalf("runs/ holds %d entries after the kill, want the dead host's", len(runs))
	}
	testutil.RunNekroExamples(t, []byte("pass"), "--data", data, "exec", "--chat", "c", "-")
	if runs, _ := os.ReadDir(filepath.Join(data, "runs")); len(runs) != 0 {
		t.Errorf("the dead host's run directory was not cleared: %v", runs)
	}
}
