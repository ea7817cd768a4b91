package basic_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/testutil"
)

type execJSON struct {
	StopType    string          `json:"stop_type"`
	Output      string          `json:"output"`
	AgentMethod string          `json:"agent_method"`
	AgentResult json.RawMessage `json:"agent_result"`
}

func run(t *testing.T, data, chat, code string) execJSON {
	t.Helper()
	r := testutil.RunNekro(t, []byte(code), "--data", data, "exec", "--chat", chat, "--user", "u1", "--json", "-")
	var res execJSON
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("%v\n%s%s", err, r.Stdout, r.Stderr)
	}
	return res
}

func prompt(t *testing.T, data, chat string) string {
	t.Helper()
	r := testutil.RunNekro(t, nil, "--data", data, "chats", "prompt", chat)
	if r.Code != 0 {
		t.Fatalf("chats prompt: %+v", r)
	}
	return r.Stdout
}

// The repeat guard, as the reference's: an identical recent message is
// skipped with a note the AI reads next; a deliberate resend goes
// through; strict mode refuses it; a very similar text draws a note; a
// reset forgets; another chat is not affected.
func TestRepeatedMessagesAreCaught(t *testing.T) {
	data := testutil.DataDir(t)
	run(t, data, "c1", `send_msg_text(_ck, "the meeting is at ten tomorrow")
send_msg_text(_ck, "the meeting is at ten tomorrow")`)
	p := prompt(t, data, "c1")
	if n := strings.Count(p, "the meeting is at ten tomorrow"); n != 1 {
		t.Errorf("the repeat was sent (%d copies):\n%s", n, p)
	}
	if !strings.Contains(p, "System Alert: Identical message has been sent recently. Auto Skip this message.") {
		t.Errorf("no note to the AI:\n%s", p)
	}
	// The note cleared the list: a deliberate resend goes through.
	run(t, data, "c1", `send_msg_text(_ck, "the meeting is at ten tomorrow")`)
	if n := strings.Count(prompt(t, data, "c1"), "the meeting is at ten tomorrow"); n != 2 {
		t.Errorf("the resend was skipped (%d copies)", n)
	}
	// Another chat sends it freely.
	run(t, data, "c2", `send_msg_text(_ck, "the meeting is at ten tomorrow")`)
	if strings.Contains(prompt(t, data, "c2"), "System Alert") {
		t.Error("chat c2 was warned about chat c1's messages")
	}
	// Similar text: sent, with a note.
	run(t, data, "c3", `send_msg_text(_ck, "please water the plants on the balcony today")
send_msg_text(_ck, "please water the plants on the balcony tonight")`)
	p = prompt(t, data, "c3")
	if !strings.Contains(p, "tonight") || !strings.Contains(p, "too similar to a recently sent message") {
		t.Errorf("similar text:\n%s", p)
	}

	// Files too: the same image twice in a row is skipped once.
	run(t, data, "c5", `open("/app/shared/a.txt", "w").write("same bytes")
send_msg_file(_ck, "/app/shared/a.txt")
send_msg_file(_ck, "/app/shared/a.txt")`)
	p = prompt(t, data, "c5")
	if !strings.Contains(p, "Identical file has been sent recently") {
		t.Errorf("the repeated file drew no note:\n%s", p)
	}
	// Strict mode refuses.
	if r := testutil.RunNekro(t, nil, "--data", data, "plugins", "config", "nekro.basic", "--set", "STRICT_MESSAGE_FILTER=true"); r.Code != 0 {
		t.Fatalf("config: %+v", r)
	}
	res := run(t, data, "c4", `send_msg_text(_ck, "hello there")
try:
    send_msg_text(_ck, "hello there")
except Exception as e:
    print(type(e).__name__, e)`)
	if !strings.Contains(res.Output, "PluginError identical message has been sent recently") {
		t.Errorf("strict: %q", res.Output)
	}
	// A reset forgets what was sent.
	testutil.RunNekro(t, nil, "--data", data, "chats", "reset", "c4")
	res = run(t, data, "c4", `send_msg_text(_ck, "hello there")`)
	if res.StopType != "NORMAL" {
		t.Errorf("after a reset: %+v", res)
	}
}

// view_str_content pages through a long string and ends the run with the
// page; turned off in the settings, it leaves the AI's reach.
func TestViewStrContentPages(t *testing.T) {
	data := testutil.DataDir(t)
	res := run(t, data, "v1", `view_str_content("\n".join(f"row {i}" for i in range(1, 251)), start_line=101, end_line=103, show_line_num=True)`)
	var page string
	json.Unmarshal(res.AgentResult, &page)
	if res.StopType != "AGENT" || res.AgentMethod != "view_str_content" ||
		!strings.HasPrefix(page, "📊 数据概览: 共 250 行 | 当前显示: 第 101-103 行 | 💡 查看下一页: view_str_content(your_str, start_line=104, end_line=203)") ||
		!strings.HasSuffix(page, "101| row 101\n102| row 102\n103| row 103") {
		t.Errorf("page: %+v\n%s", res, page)
	}
	if !strings.Contains(prompt(t, data, "v1"), "* view_str_content(") {
		t.Error("view_str_content is not offered")
	}
	if r := testutil.RunNekro(t, nil, "--data", data, "plugins", "config", "nekro.basic", "--set", "ENABLE_VIEW_STR_CONTENT=false"); r.Code != 0 {
		t.Fatalf("config: %+v", r)
	}
	p := prompt(t, data, "v1")
	if strings.Contains(p, "view_str_content(") || !strings.Contains(p, "Reference_Message: False") {
		t.Errorf("after turning it off, the prompt:\n%s", p)
	}
	res = run(t, data, "v1", `view_str_content("x")`)
	if res.StopType != "ERROR" || !strings.Contains(res.Output, "NameError") {
		t.Errorf("turned off: %+v", res)
	}
}
