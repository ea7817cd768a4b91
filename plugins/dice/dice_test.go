package dice_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/testutil"
)

// The dice plugin through the real binary: `nekro exec` for the AGENT
// methods, `nekro serve` for the commands, typed into a chat as a user
// would.

type execJSON struct {
	StopType    string `json:"stop_type"`
	Output      string `json:"output"`
	AgentMethod string `json:"agent_method"`
	AgentResult string `json:"agent_result"`
}

func run(t *testing.T, data, chat, code string) (execJSON, testutil.Result) {
	t.Helper()
	r := testutil.RunNekro(t, []byte(code), "--data", data, "exec", "--chat", chat, "--user", "u1", "--json", "-")
	var res execJSON
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("%v\nstdout %s\nstderr %s", err, r.Stdout, r.Stderr)
	}
	return res, r
}

var rollRE = regexp.MustCompile(`^\[(.*)\] \((\d+)/20\) (?:\(Lucky bonus: \+(\d)\))? roll result: (\d+)(?:\(\+(\d)\))?【(.*)】\n`)

// rollResult is what dice_roll returned, parsed.
type rollResult struct {
	difficulty, natural, bonus int
	verdict                    string
}

func parseRoll(t *testing.T, s string) rollResult {
	t.Helper()
	m := rollRE.FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("dice_roll returned an unexpected text:\n%s", s)
	}
	var r rollResult
	r.difficulty, _ = strconv.Atoi(m[2])
	r.natural, _ = strconv.Atoi(m[4])
	if m[3] != m[5] {
		t.Fatalf("the bonus is announced as %q and added as %q:\n%s", m[3], m[5], s)
	}
	r.bonus, _ = strconv.Atoi(m[5])
	r.verdict = m[6]
	return r
}

// wantVerdict is the reference's rule.
func wantVerdict(r rollResult) string {
	fixed := r.natural + r.bonus
	switch {
	case fixed == 1 && fixed < r.difficulty:
		return "大失败！"
	case r.natural == 20 && fixed >= r.difficulty:
		return "大成功！"
	case fixed < r.difficulty:
		return "失败"
	}
	return "成功"
}

// dice_roll ends the run as an AGENT method, posts the roll in the chat
// and returns it; every roll is a d20 face, judged by the reference's
// rule, and bonuses come only at difficulty 19 and 20, within +1..+3.
func TestDiceRoll(t *testing.T) {
	t.Parallel()
	data := testutil.DataDir(t)
	seen := map[int]bool{}
	bonuses := 0
	const n = 24
	for i := range n {
		difficulty := []int{1, 10, 19, 20}[i%4]
		res, r := run(t, data, "g1", fmt.Sprintf("dice_roll('撬锁', '尝试撬开生锈的铁锁', %d)\nprint('not reached')", difficulty))
		if res.StopType != "AGENT" || res.AgentMethod != "dice_roll" || r.Code != 8 || strings.Contains(res.Output, "not reached") {
			t.Fatalf("dice_roll: %+v exit %d", res, r.Code)
		}
		got := parseRoll(t, res.AgentResult)
		if got.difficulty != difficulty || got.natural < 1 || got.natural > 20 {
			t.Fatalf("roll out of range: %+v", got)
		}
		if got.bonus != 0 && (difficulty < 19 || got.bonus > 3) {
			t.Fatalf("bonus %d at difficulty %d", got.bonus, difficulty)
		}
		if got.bonus > 0 {
			bonuses++
		}
		if got.verdict != wantVerdict(got) {
			t.Errorf("%+v judged %s, want %s", got, got.verdict, wantVerdict(got))
		}
		seen[got.natural] = true
		// The users see it in the chat.
		posted := fmt.Sprintf("【检定事件】撬锁 (%d/20)\n> 尝试撬开生锈的铁锁\n========\n", difficulty)
		if !strings.Contains(r.Stderr, "sent to chat g1: "+posted) || !strings.Contains(r.Stderr, fmt.Sprintf("掷骰结果：%d", got.natural)) {
			t.Errorf("the roll was not posted to the chat:\n%s", r.Stderr)
		}
		if !strings.Contains(res.AgentResult, "Please continue to generate responses and reactions based on the results") {
			t.Errorf("the result lacks the reference's instruction:\n%s", res.AgentResult)
		}
	}
	// 24 uniform d20 rolls show fewer than 6 faces with probability < 1e-9.
	if len(seen) < 6 {
		t.Errorf("%d rolls showed only %d different faces: %v", n, len(seen), seen)
	}
	// Each of the 12 rolls at 19-20 gets a bonus with probability 11/20;
	// the rate is checked over many rolls in the package's own test.
	t.Logf("%d of %d rolls at difficulty 19-20 got a lucky bonus", bonuses, n/2)

	for _, c := range []struct{ code, want string }{
		{"dice_roll('x', 'y', 0)", "difficulty should be between 1 and 20, got 0"},
		{"dice_roll('x', 'y', 21)", "difficulty should be between 1 and 20, got 21"},
		{"dice_roll('x', 'y', '5')", "argument 'difficulty' must be int"},
	} {
		res, r := run(t, data, "g1", c.code)
		if res.StopType != "ERROR" || !strings.Contains(res.Output, c.want) || strings.Contains(r.Stderr, "sent to chat") {
			t.Errorf("%s: %+v\n%s", c.code, res, r.Stderr)
		}
	}
}

var wheelRE = regexp.MustCompile(`^\[Probability Wheel: (.*)\]\nSelected: (.*)\nProbability: ([\d.]+)/([\d.]+) \(([\d.]+)%\)\nFallback '(.*)' had: ([\d.]+)/([\d.]+) \(([\d.]+)%\)\nTotal distributed: ([\d.]+)\nContinue your response based on the selected outcome\.$`)

// probability_wheel draws one of the outcomes with weight, the fallback
// taking what is left; the draw is posted in the chat.
func TestProbabilityWheel(t *testing.T) {
	t.Parallel()
	data := testutil.DataDir(t)
	picked := map[string]int{}
	for range 12 {
		res, r := run(t, data, "g1", `probability_wheel("探索神秘宝箱", "打开一个古老宝箱", {"获得稀有魔法武器": 5.0, "获得一些金币": 30, "触发陷阱机关": 15.0, "什么都没有": 0}, fallback_choice="宝箱是空的")`)
		if res.StopType != "AGENT" || res.AgentMethod != "probability_wheel" {
			t.Fatalf("probability_wheel: %+v\n%s", res, r.Stderr)
		}
		m := wheelRE.FindStringSubmatch(res.AgentResult)
		if m == nil {
			t.Fatalf("unexpected result:\n%s", res.AgentResult)
		}
		want := map[string]string{"获得稀有魔法武器": "5.0", "获得一些金币": "30.0", "触发陷阱机关": "15.0", "宝箱是空的": "50.0"}
		if w, ok := want[m[2]]; !ok || m[3] != w || m[5] != w {
			t.Fatalf("selected %q with %s/%s (%s%%): not one of the outcomes with weight", m[2], m[3], m[4], m[5])
		}
		if m[6] != "宝箱是空的" || m[7] != "50.0" || m[8] != "100.0" || m[10] != "100.0" {
			t.Errorf("fallback or total wrong:\n%s", res.AgentResult)
		}
		picked[m[2]]++
		chatText := "📦 宝箱是空的: 50.0%\n📦 获得一些金币: 30.0%\n📦 触发陷阱机关: 15.0%\n📦 获得稀有魔法武器: 5.0%"
		chatText = strings.Replace(chatText, "📦 "+m[2]+":", "🎯 "+m[2]+":", 1)
		if !strings.Contains(r.Stderr, "sent to chat g1: 【轮盘事件】探索神秘宝箱\n> 打开一个古老宝箱\n========\n概率分配:\n"+chatText+"\n\n🎯 选择结果: 【"+m[2]+"】") {
			t.Errorf("the draw posted to the chat is not as expected:\n%s", r.Stderr)
		}
	}
	// 12 draws at 50% never landing on the fallback: p = 2.4e-4.
	if picked["宝箱是空的"] == 0 {
		t.Errorf("the 50%% fallback was never drawn: %v", picked)
	}

	// A certain outcome is always drawn; the fallback is left with 0.
	res, _ := run(t, data, "g1", `probability_wheel("coin", "a coin with two heads", {"heads": 1}, total_probability=1)`)
	if !strings.HasPrefix(res.AgentResult, "[Probability Wheel: coin]\nSelected: heads\nProbability: 1.0/1.0 (100.0%)\nFallback '其他情况' had: 0.0/1.0 (0.0%)") {
		t.Errorf("certain outcome: %+v", res)
	}
	// Only a fallback.
	res, _ = run(t, data, "g1", `probability_wheel("fate", "nothing to choose", {}, "it happens")`)
	if !strings.Contains(res.AgentResult, "Selected: it happens\nProbability: 100.0/100.0 (100.0%)") {
		t.Errorf("fallback only: %+v", res)
	}

	for _, c := range []struct{ code, want string }{
		{`probability_wheel("e", "d", {"a": 60, "b": 50})`, "the choices' probabilities add up to 110.0, more than total_probability 100.0"},
		{`probability_wheel("e", "d", {"a": -1})`, `the probability of "a" must be a non-negative number`},
		{`probability_wheel("e", "d", {"a": 1}, total_probability=0)`, "total_probability must be a positive number"},
		{`probability_wheel("e", "d", {}, "")`, "give event_choices or a fallback_choice"},
		{`probability_wheel("e", "d", ["a", "b"])`, "argument 'event_choices' must be dict"},
	} {
		res, r := run(t, data, "g1", c.code)
		if res.StopType != "ERROR" || !strings.Contains(res.Output, c.want) || strings.Contains(r.Stderr, "sent to chat") {
			t.Errorf("%s: %+v", c.code, res)
		}
	}
}

// server is a running `nekro serve` with no model.
type server struct {
	t    *testing.T
	addr string
}

func serve(t *testing.T, data string) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(testutil.Nekro(t), "--data", data, "serve", "--listen", addr, "--super-users", "root")
	cmd.Env = append(os.Environ(), "NEKRO_API_TOKEN=tok-dice")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		if t.Failed() {
			t.Logf("nekro serve:\n%s", logs.String())
		}
	})
	s := &server{t, addr}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if st, _ := s.call("GET", "/api/status", nil); st == http.StatusOK {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("nekro serve did not start:\n%s", logs.String())
		}
	}
}

func (s *server) call(method, path string, body any) (int, []byte) {
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	req, _ := http.NewRequest(method, "http://"+s.addr+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer tok-dice")
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

// say types text into chat as user and returns the command's answer.
func (s *server) say(chat, user, text string) string {
	s.t.Helper()
	if st, b := s.call("POST", "/api/chats/"+chat+"/messages", map[string]string{"user_id": user, "text": text}); st != http.StatusAccepted {
		s.t.Fatalf("%s: %d %s", text, st, b)
	}
	_, b := s.call("GET", "/api/chats/"+chat+"/messages", nil)
	var h struct {
		Messages []struct{ Role, Text string }
	}
	if err := json.Unmarshal(b, &h); err != nil || len(h.Messages) < 2 {
		s.t.Fatalf("history: %v %s", err, b)
	}
	last := h.Messages[len(h.Messages)-1]
	if last.Role != "assistant" || h.Messages[len(h.Messages)-2].Text != text {
		s.t.Fatalf("%s was not answered: %s", text, b)
	}
	return last.Text
}

// roll runs dice_roll in chat through the server and returns the natural roll.
func (s *server) roll(chat string) int {
	s.t.Helper()
	st, b := s.call("POST", "/api/chats/"+chat+"/exec", map[string]string{"code": "dice_roll('e', 'd', 10)", "user_id": "u1"})
	var res execJSON
	if err := json.Unmarshal(b, &res); st != http.StatusOK || err != nil || res.StopType != "AGENT" {
		s.t.Fatalf("exec: %d %s", st, b)
	}
	return parseRoll(s.t, res.AgentResult).natural
}

// rolls returns n rolls in chat.
func (s *server) rolls(chat string, n int) []int {
	var out []int
	for range n {
		out = append(out, s.roll(chat))
	}
	return out
}

func allEqual(rolls []int, face int) bool {
	for _, r := range rolls {
		if r != face {
			return false
		}
	}
	return true
}

// The reference's commands, for super users only: /dice_assert decides
// the next roll of the chat, /dice_lock every roll until /dice_unlock.
// The rig is the chat's own, and a chat reset clears it.
func TestRigCommands(t *testing.T) {
	t.Parallel()
	s := serve(t, testutil.DataDir(t))

	for _, c := range []struct{ user, text, want string }{
		{"u1", "/dice_lock 7", "/dice_lock: you may not use this command (it is for super users)"},
		{"u1", "/dice_assert 7", "/dice_assert: you may not use this command (it is for super users)"},
		{"u1", "/dice_unlock", "/dice_unlock: you may not use this command (it is for super users)"},
		{"root", "/dice_lock", "/dice_lock failed: 需要指定一个锁定的骰点值"},
		{"root", "/dice_assert", "/dice_assert failed: 需要指定一个骰点值"},
		{"root", "/dice_lock 21", "/dice_lock failed: 骰点值应在 1 到 20 之间"},
		{"root", "/dice_assert -3", "/dice_assert failed: 骰点值应在 1 到 20 之间"},
		{"root", "/dice_lock seven", `/dice_lock failed: value must be a whole number, not "seven" (usage: /dice_lock <1-20>)`},
	} {
		if got := s.say("g1", c.user, c.text); got != c.want {
			t.Errorf("%s as %s: %q, want %q", c.text, c.user, got, c.want)
		}
	}
	if help := s.say("g1", "u1", "/help"); strings.Contains(help, "dice_") {
		t.Errorf("/help shows the dice commands to a plain user:\n%s", help)
	}
	if help := s.say("g1", "root", "/help"); !strings.Contains(help, "/dice_assert <1-20> - ") || !strings.Contains(help, "/dice_unlock - ") {
		t.Errorf("/help for a super user:\n%s", help)
	}
	// Nothing was rigged by the refused commands: five rolls all 7 would
	// happen by chance with probability 3e-7.
	if r := s.rolls("g1", 5); allEqual(r, 7) {
		t.Fatalf("refused commands rigged the dice: %v", r)
	}

	if got := s.say("g1", "root", "/dice_lock 7"); got != "骰点已锁定为 7" {
		t.Fatalf("/dice_lock 7: %q", got)
	}
	if got := s.say("g1", "root", "/dice_assert 3"); got != "掷骰检定预言: 3/20" {
		t.Fatalf("/dice_assert 3: %q", got)
	}
	// The assertion wins once, then the lock holds.
	if r := s.rolls("g1", 4); r[0] != 3 || !allEqual(r[1:], 7) {
		t.Errorf("after /dice_lock 7 and /dice_assert 3: %v, want [3 7 7 7]", r)
	}
	// Another chat's dice are its own.
	if r := s.rolls("g2", 5); allEqual(r, 7) {
		t.Errorf("chat g2 rolls %v: g1's lock reached it", r)
	}
	if got := s.say("g1", "root", "/dice_unlock"); got != "骰点锁定已解除" {
		t.Fatalf("/dice_unlock: %q", got)
	}
	if r := s.rolls("g1", 5); allEqual(r, 7) {
		t.Errorf("after /dice_unlock: %v", r)
	}

	// A reset chat starts with fair dice.
	s.say("g1", "root", "/dice_lock 20")
	if r := s.roll("g1"); r != 20 {
		t.Fatalf("locked to 20, rolled %d", r)
	}
	if st, b := s.call("POST", "/api/chats/g1/reset", nil); st != http.StatusOK {
		t.Fatalf("reset: %d %s", st, b)
	}
	if r := s.rolls("g1", 5); allEqual(r, 20) {
		t.Errorf("after a reset: %v", r)
	}
}
