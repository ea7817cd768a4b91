package history_travel_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

// history_travel through the real binary: histories built by `nekro exec`
// runs that send messages (which land in the chat's history), searched by
// later runs; and a served chat whose scripted model searches while users
// talk.

type execJSON struct {
	StopType    string `json:"stop_type"`
	Output      string `json:"output"`
	AgentMethod string `json:"agent_method"`
	AgentResult string `json:"agent_result"`
}

func run(t *testing.T, data, chat, code string) execJSON {
	t.Helper()
	r := testutil.RunNekro(t, []byte(code), "--data", data, "exec", "--chat", chat, "--user", "u1", "--json", "-")
	var res execJSON
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("%v\nstdout %s\nstderr %s", err, r.Stdout, r.Stderr)
	}
	return res
}

// search runs code that must end with an AGENT result, and returns it.
func search(t *testing.T, data, chat, code string) string {
	t.Helper()
	res := run(t, data, chat, code)
	if res.StopType != "AGENT" {
		t.Fatalf("%s: %+v", code, res)
	}
	return res.AgentResult
}

// fails runs code that must fail with want in its output.
func fails(t *testing.T, data, chat, code, want string) string {
	t.Helper()
	res := run(t, data, chat, code)
	if res.StopType != "ERROR" || !strings.Contains(res.Output, want) {
		t.Errorf("%s: want an error with %q, got %+v", code, want, res)
	}
	return res.Output
}

// send puts messages into chat's history.
func send(t *testing.T, data, chat string, texts ...string) {
	t.Helper()
	var code strings.Builder
	for _, s := range texts {
		fmt.Fprintf(&code, "send_msg_text(_ck, %q)\n", s)
	}
	if res := run(t, data, chat, code.String()); res.StopType != "NORMAL" {
		t.Fatalf("send: %+v", res)
	}
}

var entryRE = regexp.MustCompile(`(?m)^\[#(\d+) [^\]]+\] you \(assistant\): (.*)$`)

// found lists the texts of the entries a result shows, in order, and
// their ids.
func found(result string) (texts, ids []string) {
	for _, m := range entryRE.FindAllStringSubmatch(result, -1) {
		ids = append(ids, m[1])
		texts = append(texts, m[2])
	}
	return texts, ids
}

func wantFound(t *testing.T, what, result string, want ...string) {
	t.Helper()
	got, _ := found(result)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("%s found %q, want %q\nresult:\n%s", what, got, want, result)
	}
}

const queryNote = "[Query %d messages. You NEED to use the 'find_history_travel_range' method to get more context around a specific message. DO NOT GUESS THE EXACT CONTEXT ACCORDING TO THE SIMPLIFIED MESSAGE.]"

// Keyword search over the chat's own history, with the reference's
// OR / +AND / -NOT words; another chat's history is never found, and a
// chat key other than the run's own is refused.
func TestSearchesOnlyItsOwnChat(t *testing.T) {
	t.Parallel()
	data := testutil.DataDir(t)
	send(t, data, "group_a", "我们中午去吃饭吧", "午饭吃什么", "晚餐吃鱼", "晚餐吃面", "Project Apollo kicks off on Monday")
	send(t, data, "group_b", "the vault code is 4711", "晚餐 in group b")

	r := search(t, data, "group_a", `find_history_travel(_ck, ["晚餐", "-鱼"])`)
	wantFound(t, "晚餐 -鱼", r, "晚餐吃面")
	if !strings.HasSuffix(r, "\n\n"+fmt.Sprintf(queryNote, 1)) {
		t.Errorf("the result lacks the note on find_history_travel_range:\n%s", r)
	}
	wantFound(t, "吃饭 | 午饭", search(t, data, "group_a", `find_history_travel(_ck, ["吃饭", "午饭"])`), "我们中午去吃饭吧", "午饭吃什么")
	wantFound(t, "+午饭 +吃", search(t, data, "group_a", `find_history_travel(_ck, ["+午饭", "+吃"])`), "午饭吃什么")
	wantFound(t, "晚餐 +面", search(t, data, "group_a", `find_history_travel(_ck, ["晚餐", "+面"])`), "晚餐吃面")
	wantFound(t, "any case", search(t, data, "group_a", `find_history_travel(_ck, ["apollo"])`), "Project Apollo kicks off on Monday")
	// The headers are not searched: every entry's says "assistant".
	if r := search(t, data, "group_a", `find_history_travel(_ck, ["assistant"])`); r != "[No messages found matching OR: assistant]" {
		t.Errorf("a header matched: %s", r)
	}
	if r := search(t, data, "group_a", `find_history_travel(_ck, ["鱼", "+晚餐", "-吃"])`); r != "[No messages found matching OR: 鱼, AND: 晚餐, NOT: 吃]" {
		t.Errorf("no match: %s", r)
	}

	// group_b's messages exist, but group_a cannot find them.
	if r := search(t, data, "group_a", `find_history_travel(_ck, ["vault", "4711"])`); r != "[No messages found matching OR: vault, 4711]" {
		t.Errorf("group_a found group_b's message: %s", r)
	}
	wantFound(t, "晚餐 in group_a", search(t, data, "group_a", `find_history_travel(_ck, ["晚餐"])`), "晚餐吃鱼", "晚餐吃面")
	bResult := search(t, data, "group_b", `find_history_travel(_ck, ["vault"])`)
	wantFound(t, "vault in group_b", bResult, "the vault code is 4711")
	_, bIDs := found(bResult)

	// Naming the other chat is refused, not acted on.
	for _, code := range []string{
		`find_history_travel("group_b", ["vault"])`,
		`find_history_travel_range("group_b", "` + bIDs[0] + `")`,
	} {
		out := fails(t, data, "group_a", code, `chat_key "group_b" is not this chat`)
		if strings.Contains(out, "4711") {
			t.Errorf("%s leaked group_b's message:\n%s", code, out)
		}
	}
	// group_b's message id does not reach into group_b either.
	out := fails(t, data, "group_a", `find_history_travel_range(_ck, "`+bIDs[0]+`")`, "is not in this chat's searchable history")
	if strings.Contains(out, "4711") {
		t.Errorf("a range query around group_b's message leaked it:\n%s", out)
	}
}

// The range query shows the messages around one, by its id given as the
// history shows it; its size is bounded.
func TestRange(t *testing.T) {
	t.Parallel()
	data := testutil.DataDir(t)
	send(t, data, "g1", "first: the plan", "second: a question", "third: the fish answer", "fourth: more", "fifth: the end")
	_, ids := found(search(t, data, "g1", `find_history_travel(_ck, ["fish"])`))
	if len(ids) != 1 {
		t.Fatalf("fish: %v", ids)
	}
	id := ids[0]
	for _, arg := range []string{`"` + id + `"`, id, `"#` + id + `"`} {
		wantFound(t, "range 1 1 around "+arg, search(t, data, "g1", "find_history_travel_range(_ck, "+arg+", 1, 1)"),
			"second: a question", "third: the fish answer", "fourth: more")
	}
	wantFound(t, "default range", search(t, data, "g1", `find_history_travel_range(_ck, "`+id+`")`),
		"first: the plan", "second: a question", "third: the fish answer", "fourth: more", "fifth: the end")
	wantFound(t, "prev 0 next 0", search(t, data, "g1", `find_history_travel_range(_ck, "`+id+`", prev_count=0, next_count=0)`),
		"third: the fish answer")

	fails(t, data, "g1", `find_history_travel_range(_ck, "`+id+`", 10, 10)`, "查询范围过大: prev_count + next_count is 20, at most 16")
	fails(t, data, "g1", `find_history_travel_range(_ck, "`+id+`", -1, 1)`, "must not be negative")
	fails(t, data, "g1", `find_history_travel_range(_ck, "abc")`, `base_msg_id must be a message id such as "42"`)
	fails(t, data, "g1", `find_history_travel_range(_ck, "999999")`, "message #999999 is not in this chat's searchable history")
}

// A search returns at most max_query_size messages (8 by default, as the
// reference), the newest of equally good matches, in the order they were
// sent; the operator can change the limit.
func TestQueryLimit(t *testing.T) {
	t.Parallel()
	data := testutil.DataDir(t)
	var texts []string
	for i := 1; i <= 12; i++ {
		texts = append(texts, fmt.Sprintf("ticket %d: %s", i, strings.Repeat(string(rune('a'+i)), i)))
	}
	send(t, data, "g1", texts...)
	send(t, data, "g1", "ticket 13 is urgent")
	r := search(t, data, "g1", `find_history_travel(_ck, ["ticket"])`)
	wantFound(t, "ticket", r, append(texts[5:], "ticket 13 is urgent")...)
	if !strings.HasSuffix(r, fmt.Sprintf(queryNote, 8)) {
		t.Errorf("count: %s", r)
	}
	// A message matching more words ranks first, however old.
	r = search(t, data, "g1", `find_history_travel(_ck, ["ticket", "urgent"])`)
	got, _ := found(r)
	if len(got) != 8 || got[7] != "ticket 13 is urgent" || got[0] != texts[5] {
		t.Errorf("ticket | urgent: %q", got)
	}
	wantFound(t, "ticket +urgent", search(t, data, "g1", `find_history_travel(_ck, ["ticket", "+urgent"])`), "ticket 13 is urgent")

	if r := testutil.RunNekro(t, nil, "--data", data, "plugins", "config", "nekro.history_travel", "--set", "max_query_size=3"); r.Code != 0 {
		t.Fatalf("plugins config: %+v", r)
	}
	wantFound(t, "ticket, 3 at most", search(t, data, "g1", `find_history_travel(_ck, ["ticket"])`), texts[10], texts[11], "ticket 13 is urgent")
}

// In a served chat, the model's searches see the users' messages, and not
// the plugin's own earlier answers (recorded in the history as system
// messages, they would match their own keywords again).
func TestSearchInTurns(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var results []string
	model, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		last := r.Last()
		if strings.HasPrefix(last, "[Agent Method Response] find_history_travel returned:") {
			mu.Lock()
			defer mu.Unlock()
			results = append(results, last)
			return llmtest.Code(fmt.Sprintf("send_msg_text(_ck, \"searched %d\")", len(results)))
		}
		if r.Contains("any news from Alice") {
			return llmtest.Code(`find_history_travel(_ck, ["noodles", "user"])`)
		}
		return llmtest.Code(`find_history_travel(_ck, ["noodles"])`)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(testutil.Nekro(t), "--data", testutil.DataDir(t), "serve", "--listen", addr)
	cmd.Env = append(os.Environ(), "NEKRO_LLM_BASE_URL="+model.URL, "NEKRO_LLM_MODEL=scripted", "NEKRO_API_TOKEN=tok-history")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		if t.Failed() {
			t.Logf("nekro serve:\n%s", logs.String())
		}
	}()
	call := func(method, path string, body any) (int, []byte) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, "http://"+addr+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer tok-history")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		var out bytes.Buffer
		out.ReadFrom(resp.Body)
		return resp.StatusCode, out.Bytes()
	}
	say := func(text string, turns int) {
		t.Helper()
		posted := false
		for deadline := time.Now().Add(20 * time.Second); !posted && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			st, _ := call("POST", "/api/chats/g1/messages", map[string]string{"user_id": "u1", "user_name": "Alice", "text": text})
			posted = st == http.StatusAccepted
		}
		if !posted {
			t.Fatalf("%q was not accepted:\n%s", text, logs.String())
		}
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			_, b := call("GET", "/api/chats/g1/messages", nil)
			var h struct{ Messages []struct{ Text string } }
			json.Unmarshal(b, &h)
			n := 0
			for _, m := range h.Messages {
				if strings.HasPrefix(m.Text, "searched ") {
					n++
				}
			}
			if n >= turns {
				return
			}
		}
		_, h := call("GET", "/api/chats/g1/messages", nil)
		_, tb := call("GET", "/api/chats/g1/turns", nil)
		t.Fatalf("the turn answering %q did not end:\n%s\n%s", text, h, tb)
	}
	say("Lunch plan: noodles at noon", 1)
	say("any news from Alice?", 2)

	mu.Lock()
	defer mu.Unlock()
	if len(results) != 2 {
		t.Fatalf("%d search results reached the model, want 2: %q", len(results), results)
	}
	for i, r := range results {
		if n := strings.Count(r, "Lunch plan: noodles at noon"); n != 1 {
			t.Errorf("search %d shows the lunch message %d times, want once (its own earlier answer left out):\n%s", i+1, n, r)
		}
		if !strings.Contains(r, `"Alice" (user id u1): Lunch plan: noodles at noon`) {
			t.Errorf("search %d does not show the user's message as the history does:\n%s", i+1, r)
		}
		if !strings.Contains(r, fmt.Sprintf(queryNote, 1)) {
			t.Errorf("search %d: want exactly one message found (the header's \"user id\" is not searched):\n%s", i+1, r)
		}
	}
}
