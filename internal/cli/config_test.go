package cli_test

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

// writeConfig writes a config file (mode 0600: it holds secrets) and
// returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "nekro.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// syncBuffer collects a process's output while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A config file alone drives nekro serve: the address it listens on, the
// model, its key (a key no flag can carry) and the plugins; the
// environment beats the file; the start is logged at info by default
// (address, data, model groups) without the key, and a turn adds nothing
// at info.
func TestConfigFileDrivesServe(t *testing.T) {
	model, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply { return llmtest.Code(`send_msg_text(_ck, "hi from the model")`) })
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	addr := freeAddr(t)
	data := testutil.DataDir(t)
	cfg := writeConfig(t, `# nekro's settings
listen: `+addr+`
plugins: nekro.basic
llm:
  base-url: `+model.URL+`
  model: file-model
  api-key: sk-from-the-file-0123
  groups:
    vision:
      model: eyes
`)
	var logs syncBuffer
	cmd := exec.Command(testutil.Nekro(t), "--config", cfg, "serve", "--data", data)
	cmd.Env = append(os.Environ(), "NEKRO_API_TOKEN=tok-config", "NEKRO_LLM_MODEL=env-model")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	call := func(method, path string, body any) (int, string) {
		var rd *bytes.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		} else {
			rd = bytes.NewReader(nil)
		}
		req, _ := http.NewRequest(method, "http://"+addr+path, rd)
		req.Header.Set("Authorization", "Bearer tok-config")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	var status string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		st, body := call("GET", "/api/status", nil)
		if st == http.StatusOK {
			status = body
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nekro serve did not listen on %s, the config file's address:\n%s", addr, logs.String())
		}
	}
	var st struct {
		Model   string `json:"model"`
		Plugins []struct {
			Key string `json:"key"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(status), &st); err != nil {
		t.Fatal(err)
	}
	if st.Model != "env-model" {
		t.Errorf("model %q: NEKRO_LLM_MODEL must beat the file's llm.model", st.Model)
	}
	if len(st.Plugins) != 1 || st.Plugins[0].Key != "nekro.basic" {
		t.Errorf("plugins: %+v, want only nekro.basic (the file's plugins)", st.Plugins)
	}
	if code, body := call("POST", "/api/chats/cfg/messages", map[string]string{"user_id": "u1", "text": "hello"}); code != http.StatusAccepted {
		t.Fatalf("post: %d %s", code, body)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, h := call("GET", "/api/chats/cfg/messages", nil); strings.Contains(h, "hi from the model") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer:\n%s", logs.String())
		}
	}
	reqs := model.Requests()
	if len(reqs) == 0 || reqs[0].Auth != "Bearer sk-from-the-file-0123" || reqs[0].Model != "env-model" {
		t.Errorf("the model was asked with the wrong key or model: %+v", reqs)
	}
	out := logs.String()
	for _, want := range []string{"level=INFO", `msg="nekro serving"`, "listen=" + addr, "config=" + cfg,
		"group=chat model=env-model", "group=vision model=eyes"} {
		if !strings.Contains(out, want) {
			t.Errorf("the start's info log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "sk-from-the-file") {
		t.Errorf("the log shows the API key:\n%s", out)
	}
	// Per turn, nothing at info: the log still ends with the start's lines.
	var infos []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "level=INFO") {
			infos = append(infos, l)
		}
	}
	if len(infos) > 6 {
		t.Errorf("serve logs %d lines at info, a turn included; want only the start's:\n%s", len(infos), strings.Join(infos, "\n"))
	}
}

// Precedence: a flag beats its environment variable, which beats the
// config file, which beats the default; config show names each source
// (the file with its line) and masks secrets wherever they came from.
func TestConfigPrecedenceAndShow(t *testing.T) {
	data := testutil.DataDir(t)
	// The data directory's nekro.yaml is read without --config.
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	file := `max-iterations: 5
max-runs: 3
zygotes: 2
onebot:
  token: ob-file-secret-77
  groups: [100, 200]
plugin-dir: [/opt/a, /opt/b]
llm:
  api-key: sk-file-secret-88
  groups:
    vision:
      model: eyes
      api-key: sk-vision-secret-99
`
	if err := os.WriteFile(filepath.Join(data, "nekro.yaml"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(t, []string{"NEKRO_MAX_ITERATIONS=6", "NEKRO_MAX_RUNS=4", "NEKRO_TELEGRAM_TOKEN=tg-env-secret-66"}, nil,
		"--data", data, "config", "show", "--max-iterations", "7")
	if r.Code != 0 {
		t.Fatalf("config show: %+v", r)
	}
	for _, want := range []string{
		"# config file " + filepath.Join(data, "nekro.yaml") + " (named by the data directory)",
		"max-iterations: 7", "# flag --max-iterations",
		"max-runs: 4", "# env NEKRO_MAX_RUNS",
		"zygotes: 2", "nekro.yaml:3\n",
		"onebot-token: (hidden)", "nekro.yaml:5\n",
		"onebot-groups: 100,200", "plugin-dir: [/opt/a, /opt/b]",
		"telegram-token: (hidden)", "# env NEKRO_TELEGRAM_TOKEN",
		"llm-api-key: (hidden)", "nekro.yaml:9\n",
		"listen: 127.0.0.1:8021", "# default",
		"      model: eyes  # " + filepath.Join(data, "nekro.yaml") + ":12",
		"      api-key: (hidden)  # " + filepath.Join(data, "nekro.yaml") + ":13",
	} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("config show lacks %q:\n%s", want, r.Stdout)
		}
	}
	for _, secret := range []string{"ob-file-secret", "sk-file-secret", "sk-vision-secret", "tg-env-secret"} {
		if strings.Contains(r.Stdout+r.Stderr, secret) {
			t.Errorf("config show shows a secret (%s):\n%s", secret, r.Stdout)
		}
	}
	// Without the flag the variable wins; without it, the file.
	r = run(t, []string{"NEKRO_MAX_ITERATIONS=6"}, nil, "--data", data, "config", "show")
	if !strings.Contains(r.Stdout, "max-iterations: 6") {
		t.Errorf("env should beat the file:\n%s", r.Stdout)
	}
	r = run(t, nil, nil, "--data", data, "config", "show")
	if !strings.Contains(r.Stdout, "max-iterations: 5") || !strings.Contains(r.Stdout, "max-runs: 3") {
		t.Errorf("the file should beat the defaults:\n%s", r.Stdout)
	}
	// The file's shared settings apply to other commands too: exec has
	// --max-runs, and refuses the file's bad value for it.
	bad := writeConfig(t, "max-runs: 0\n")
	r = run(t, nil, []byte("print('ran')"), "--config", bad, "--data", data, "exec", "--chat", "c", "-")
	if r.Code == 0 || strings.Contains(r.Stdout, "ran") || !strings.Contains(r.Stderr, bad+":1: max-runs: 0: must be at least 1") {
		t.Errorf("exec with max-runs: 0 in the file: %+v", r)
	}
}

// A config file with a key that is no setting, or a value its flag does
// not take, is refused by every command, naming the file, the line and
// the key; so is a --config naming no file.
func TestConfigFileRefusals(t *testing.T) {
	data := testutil.DataDir(t)
	cases := []struct{ yaml, want string }{
		{"listen: 127.0.0.1:0\nlissten: 127.0.0.1:1\n", `:2: unknown key "lissten" (did you mean "listen"?)`},
		{"onebot:\n  tokn: x\n", `:2: unknown key "onebot-tokn" (did you mean "onebot-token"?)`},
		{"frobnicate: 3\n", `:1: unknown key "frobnicate": the keys are the long names of nekro serve's flags`},
		{"\n\nmax-iterations: many\n", `:3: max-iterations: "many" is not a whole number`},
		{"shutdown-timeout: soon\n", `:1: shutdown-timeout: "soon" is not a duration`},
		{"sandbox: lxc\n", `:1: sandbox: lxc: must be bwrap or docker`},
		{"shared-quota: lots\n", `:1: shared-quota`},
		{"listen: [a, b]\n", `:1: listen: takes one value, not a list`},
		{"llm:\n  groups:\n    vision:\n      modle: x\n", `:4: unknown key "modle": a model group has base-url, model, api-key, context-window and max-tokens`},
		{"listen: a:1\nlisten: b:2\n", `:2: listen is set twice (also on line 1)`},
		{"- listen\n", `:1: want a mapping of settings`},
	}
	for _, c := range cases {
		cfg := writeConfig(t, c.yaml)
		for _, args := range [][]string{{"serve"}, {"config", "show"}, {"kv", "--plugin", "nekro.basic", "list"}} {
			r := run(t, nil, nil, append([]string{"--config", cfg, "--data", data}, args...)...)
			if r.Code == 0 || !strings.Contains(r.Stderr, cfg+c.want) {
				t.Errorf("%v with %q: want a refusal with %q, got %+v", args, c.yaml, cfg+c.want, r)
			}
		}
	}
	// Help works whatever the file says.
	broken := writeConfig(t, "bogus: 1\n")
	if r := run(t, []string{"NEKRO_CONFIG=" + broken}, nil, "help", "serve"); r.Code != 0 || !strings.Contains(r.Stdout, "--config") {
		t.Errorf("help with a broken config file: %+v", r)
	}
	r := run(t, nil, nil, "--config", filepath.Join(data, "none.yaml"), "config", "show")
	if r.Code == 0 || !strings.Contains(r.Stderr, "--config "+filepath.Join(data, "none.yaml")) {
		t.Errorf("a missing --config file: %+v", r)
	}
	r = run(t, []string{"NEKRO_CONFIG=" + filepath.Join(data, "none.yaml")}, nil, "config", "show")
	if r.Code == 0 || !strings.Contains(r.Stderr, "NEKRO_CONFIG "+filepath.Join(data, "none.yaml")) {
		t.Errorf("a missing NEKRO_CONFIG file: %+v", r)
	}
}

// The example nekro.yaml of docs/operating.md is a config file nekro
// takes, with the lines the page says.
func TestOperatingDocsExampleConfig(t *testing.T) {
	md, err := os.ReadFile(filepath.Join("..", "..", "docs", "operating.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(md), "### The config file")
	_, block, ok2 := strings.Cut(after, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/operating.md has no yaml block under The config file")
	}
	cfg := writeConfig(t, block)
	r := run(t, nil, nil, "--config", cfg, "--data", testutil.DataDir(t), "config", "show")
	if r.Code != 0 {
		t.Fatalf("config show of the docs' example: %+v", r)
	}
	for _, want := range []string{"listen: 127.0.0.1:8080", cfg + ":2\n", "onebot-token: (hidden)", cfg + ":17\n", "onebot-bot-names: Nekro",
		"super-users: [10001]", "llm-model: gpt-4o-mini", "      model: gpt-4o  # " + cfg + ":15"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("config show of the docs' example lacks %q:\n%s", want, r.Stdout)
		}
	}
}
