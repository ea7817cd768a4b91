package pyplugin_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

// execData runs code with `nekro exec` in chat, on the data directory
// data, with extra flags.
func execData(t *testing.T, data, dir, chat, code string, flags ...string) testutil.Result {
	t.Helper()
	args := append([]string{"exec", "--data", data, "--plugin-dir", dir, "--chat", chat, "--user", "u1"}, flags...)
	return testutil.RunNekro(t, []byte(code), append(args, "-")...)
}

// The reference's workspace knowledge base (kb_tools' imports and calls)
// reads nekro's knowledge base for the call's chat: the chat's own
// documents and the global ones, never another chat's; a search finds
// them, a document's text is its chunks joined, and a chunk's span in it
// is that chunk.
func TestWorkspaceKnowledgeIsTheChats(t *testing.T) {
	m, err := llmtest.Start(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "OK"} })
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for k, v := range map[string]string{"NEKRO_LLM_BASE_URL": m.URL, "NEKRO_LLM_MODEL": "scripted",
		"NEKRO_LLM_API_KEY": "k", "NEKRO_LLM_EMBEDDING_MODEL": "embedder"} {
		t.Setenv(k, v)
	}
	data := testutil.DataDir(t)
	if r := execData(t, data, "testdata/workspace", "onebot_v11-group_123", "print(1)"); r.Code != 0 {
		t.Fatalf("exec: %+v", r) // creates the database
	}
	files := t.TempDir()
	add := func(name, text, scope string) string {
		t.Helper()
		p := filepath.Join(files, name)
		os.WriteFile(p, []byte(text), 0o644)
		r := testutil.RunNekro(t, nil, "--data", data, "knowledge", "add", p, "--scope", scope, "--json")
		var d struct{ ID, Status string }
		if json.Unmarshal([]byte(r.Stdout), &d); r.Code != 0 || d.Status != "ready" {
			t.Fatalf("knowledge add %s: %+v", name, r)
		}
		return d.ID
	}
	var b strings.Builder // long enough for several chunks, each starting with the end of the one before
	for i := 1; i <= 60; i++ {
		fmt.Fprintf(&b, "Rule %d: the umbrella stand number %d is by door %d. ", i, i, i*7)
	}
	long := b.String() + "\n\nUmbrellas are lent for a day."
	add("umbrellas.md", long, "chat:onebot_v11-group_123")
	add("hours.md", "The office opens at nine.", "global")
	secret := add("secret.md", "The umbrella vault code is 9911.", "chat:onebot_v11-group_456")
	number, _ := strconv.ParseInt(secret[3:12], 16, 64) // the reference's id of chat 456's document

	r := execData(t, data, "testdata/workspace", "onebot_v11-group_123", fmt.Sprintf("print(kb_probe('umbrella stand', %d))", number))
	if r.Code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	var out struct {
		Workspace   string   `json:"workspace"`
		SameID      bool     `json:"same_id"`
		Documents   []string `json:"documents"`
		Categories  []string `json:"categories"`
		Hits        []string `json:"hits"`
		Status      string   `json:"status"`
		Text        string   `json:"text"`
		ChunkInText bool     `json:"chunk_in_text"`
		Asset       any      `json:"asset"`
		Bound       bool     `json:"bound"`
		Other       any      `json:"other"`
		SourceFile  string   `json:"source_file"`
	}
	line := r.Stdout[strings.Index(r.Stdout, "{"):]
	if err := json.Unmarshal([]byte(strings.TrimSpace(line[:strings.LastIndex(line, "}")+1])), &out); err != nil {
		t.Fatalf("kb_probe: %v\n%s", err, r.Stdout)
	}
	if out.Workspace != "onebot_v11-group_123" || !out.SameID {
		t.Errorf("the chat's workspace: %+v", out)
	}
	if strings.Join(out.Documents, ",") != "hours.md,umbrellas.md" || strings.Join(out.Categories, ",") != "-,global" {
		t.Errorf("documents of chat 123: %v %v (chat 456's secret.md must not be among them)", out.Documents, out.Categories)
	}
	if len(out.Hits) == 0 || out.Hits[0] != "umbrellas.md" || strings.Contains(strings.Join(out.Hits, ","), "secret") {
		t.Errorf("search hits: %v", out.Hits)
	}
	// The text is the chunks joined (their overlaps dropped), as
	// normalized: the file's words, spaces at chunk boundaries aside.
	if out.Status != "ready" || strings.Join(strings.Fields(out.Text), " ") != strings.Join(strings.Fields(long), " ") {
		t.Errorf("the document's text is not the file's (status %s):\n%q", out.Status, out.Text)
	}
	if !out.ChunkInText {
		t.Error("a chunk's span in the document's text is not the chunk")
	}
	if out.Asset != nil || out.Bound || out.Other != nil {
		t.Errorf("assets, or chat 456's document, seen from chat 123: asset %v bound %v other %v", out.Asset, out.Bound, out.Other)
	}
	if !strings.Contains(out.SourceFile, "NotAvailableError") || !strings.Contains(out.SourceFile, "not the file") {
		t.Errorf("the source file: %q", out.SourceFile)
	}
	if strings.Contains(r.Stdout, "9911") {
		t.Errorf("chat 456's document reached chat 123:\n%s", r.Stdout)
	}

	// A turn's prompt hook lists its chat's documents, as kb_tools' does.
	dir, _ := filepath.Abs("testdata/workspace")
	srv := testutil.Serve(t, data, "tok", "NEKRO_PLUGIN_DIR="+dir)
	var prompt struct {
		Messages []struct{ Content string } `json:"messages"`
	}
	st, body := srv.API("GET", "/api/chats/onebot_v11-group_123/prompt", nil)
	if json.Unmarshal([]byte(body), &prompt); st != 200 || len(prompt.Messages) == 0 {
		t.Fatalf("prompt: %d %s", st, body)
	}
	all := ""
	for _, m := range prompt.Messages {
		all += m.Content + "\n"
	}
	if !strings.Contains(all, "KB catalog of onebot_v11-group_123: hours.md, umbrellas.md") {
		t.Errorf("the prompt hook's catalog:\n%s\n%s", prompt.Messages[0].Content, srv.Logs)
	}
}

// The reference's memory query service (memory_tools' imports and calls)
// reads the memories learned in the call's chat, and only when nekro's
// memory is on; another chat's memory is not found.
func TestWorkspaceMemoriesAreTheChats(t *testing.T) {
	data := testutil.DataDir(t)
	if r := execData(t, data, "testdata/workspace", "onebot_v11-group_123", "print(1)"); r.Code != 0 {
		t.Fatalf("exec: %+v", r) // creates the database and its memory tables
	}
	d, err := sql.Open("sqlite", filepath.Join(data, "nekro.db"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	var other int64
	for _, m := range [][3]string{
		{"onebot_v11-group_123", "", "The group meets on Fridays for coffee."},
		{"onebot_v11-group_123", "u1", "u1 prefers tea to coffee."},
		{"onebot_v11-group_456", "", "The secret coffee blend is Kona."},
	} {
		scope := "memory:chat:" + m[0]
		if m[1] != "" {
			scope = "memory:user:" + m[0] + ":" + m[1]
		}
		res, err := d.Exec(`INSERT INTO memories (chat_key, user_id, scope, text, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
			m[0], m[1], scope, m[2], now, now)
		if err != nil {
			t.Fatal(err)
		}
		other, _ = res.LastInsertId()
	}
	d.Close()

	r := execData(t, data, "testdata/workspace", "onebot_v11-group_123", "print(memory_probe('coffee'))")
	if r.Code != 0 || !strings.Contains(r.Stdout, `{"enabled": false}`) {
		t.Fatalf("without --memory: %+v", r)
	}
	r = execData(t, data, "testdata/workspace", "onebot_v11-group_123", fmt.Sprintf("print(memory_probe('coffee', %d))", other), "--memory")
	if r.Code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	for _, w := range []string{"Fridays for coffee", "u1 prefers tea", `"origin": "onebot_v11-group_123"`,
		fmt.Sprintf(`"other": "memory %d not found in this chat"`, other)} {
		if !strings.Contains(r.Stdout, w) {
			t.Errorf("output lacks %q:\n%s", w, r.Stdout)
		}
	}
	if strings.Contains(r.Stdout, "Kona") {
		t.Errorf("chat 456's memory reached chat 123:\n%s", r.Stdout)
	}
}

// The reference's task API runs a plugin's asynchronous task in its
// process: started by one call, it waits for a signal another call sends,
// and its state is kept after it ends. The Claude Code sandbox's services
// say they are not available. A stored message renders as the reference's
// history prompt (history_travel).
func TestPluginTasksAndSandboxServices(t *testing.T) {
	r := execIn(t, "testdata/workspace", "onebot_v11-group_123",
		"print(task_probe('start'))\nprint(task_probe('go'))\nprint(task_probe('state'))\nprint(sandbox_probe())\n"+
			"print(history_prompt('see you at nine'))\n")
	if r.Code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	for _, w := range []string{
		"start running=True progress waiting for go", "go running=False success lift-off after 3",
		"state running=False success lift-off after 3", "stopped\n",
		"NotAvailableError: CCSandboxClient.get_workspace_queue() is not available in nekro: nekro runs no Claude Code sandbox",
		"NotAvailableError: DBWorkspace.create() is not available in nekro",
		`id:-1] "assistant" 说: see you at nine`, // history_travel's prompt of a stored message
	} {
		if !strings.Contains(r.Stdout, w) {
			t.Errorf("output lacks %q:\n%s", w, r.Stdout)
		}
	}
	if strings.Contains(r.Stderr, "asynchronous tasks") {
		t.Errorf("the task, run now, is said to be unserved:\n%s", r.Stderr)
	}
}

// A plugin importing a package the reference's nekro-agent provides its
// plugins (lunar_python, without declaring it) gets it installed into its
// own environment from --python-index; with no index its load fails
// naming the package and the flag.
func TestReferencePackagesInstalled(t *testing.T) {
	wheels, plugins := t.TempDir(), t.TempDir()
	writeVersionWheel(t, wheels, "lunar_python", "1.4.0")
	os.WriteFile(filepath.Join(plugins, "lunar_user.py"), []byte(`from lunar_python import VERSION
from nekro_agent.api.plugin import NekroPlugin, SandboxMethodType
from nekro_agent.api.schemas import AgentCtx

plugin = NekroPlugin(name="Lunar user", module_name="lunar_user", description="imports lunar_python",
                     version="1", author="tester", url="https://example.org")


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "lunar version")
async def lunar_version(_ctx: AgentCtx) -> str:
    """lunar_python's version."""
    return VERSION
`), 0o644)
	data := testutil.DataDir(t)
	r := testutil.RunNekro(t, nil, "plugins", "--data", data, "--plugin-dir", plugins)
	if r.Code == 0 || !strings.Contains(r.Stdout+r.Stderr, "lunar-python>=1.3.12") || !strings.Contains(r.Stdout+r.Stderr, "--python-index") {
		t.Fatalf("without an index: %+v", r)
	}
	r = testutil.RunNekro(t, []byte("print(lunar_version())"), "exec", "--data", data, "--plugin-dir", plugins,
		"--python-index", wheels, "--chat", "c1", "-")
	if r.Code != 0 || strings.TrimSpace(r.Stdout) != "1.4.0" {
		t.Fatalf("with the index: %+v", r)
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import lunar_python").Run(); err == nil {
		t.Skip("the system has lunar_python: the plugin's own environment cannot be told apart")
	}
}
