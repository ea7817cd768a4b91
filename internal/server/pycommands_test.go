package server_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
)

// pyCommands holds the Python test plugin with chat commands.
var pyCommands = filepath.Join("..", "pyplugin", "testdata", "commands")

// A Python plugin's chat commands (mount_command, a command group) run on
// nekro's command system through a running server: the prefix, Arg
// parsing (positional, key:value, greedy, range, choices), nekro's
// permissions for the reference's levels, the execution context, a
// streamed answer, the store from a command, /help, a command addressed
// as plugin-key:name; and no model request
// is made for any of them.
func TestPythonPluginCommands(t *testing.T) {
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "the model answered"} },
		func(o *serveOptions) {
			o.App.PluginDirs = []string{pyCommands}
			o.App.Agent.SuperUsers = []string{"root1"}
		})
	say := func(user, text string) string {
		t.Helper()
		var out struct{ Error string }
		if st := e.call("POST", "/api/chats/onebot_v11-group_7/messages",
			map[string]string{"user_id": user, "user_name": "Ann " + user, "text": text}, &out); st != http.StatusAccepted {
			t.Fatalf("%s: %d %s", text, st, out.Error)
		}
		h := e.history("onebot_v11-group_7")
		last := h[len(h)-1]
		if last.Role != "assistant" || h[len(h)-2].Text != text {
			t.Fatalf("%s: history ends %+v", text, h[len(h)-2:])
		}
		return last.Text
	}
	const usage = "(usage: /mycmd <n> [times:<k>])"
	for _, c := range []struct{ user, text, want string }{
		{"u1", "/mycmd 3", "3 x 2 = 6 for Ann u1 (u1 in onebot_v11-group_7, adapter 'onebot_v11')"},
		{"u1", "/mc 4 times:5", "4 x 5 = 20 for Ann u1 (u1 in onebot_v11-group_7, adapter 'onebot_v11')"},
		{"u1", "/mycmd times:3 7", "7 x 3 = 21 for Ann u1 (u1 in onebot_v11-group_7, adapter 'onebot_v11')"},
		{"u1", "/mycmd three", "/mycmd failed: 参数 n 需要整数类型 " + usage},
		{"u1", "/mycmd 300", "/mycmd failed: 参数 n 的值需在 0-100 之间 " + usage},
		{"u1", "/mycmd", "/mycmd failed: 缺少必填参数: n (the number) " + usage},
		{"u1", "/steps wash the dishes", "working on wash the dishes\ndone"},
		{"u1", "/steps", "working on it\ndone"},
		{"u1", "/pick blue", "picked blue"},
		{"u1", "/pick green", "/pick failed: 参数 colour 的值必须是 ['red', 'blue'] 之一 (usage: /pick <colour>)"},
		{"u1", "/wipeall", "/wipeall: you may not use this command (it is for super users)"},
		{"root1", "/wipeall", "wiped by root1 (super True)"},
		{"u1", "/vet", "/vet: you may not use this command (it is for the chat's admins)"},
		{"root1", "/vet", "/vet failed: not today, Ann root1"},
		{"u1", `/kv.put key:colour value:"sky blue"`, "colour = sky blue"},
		{"u1", "/kv.get colour", "colour is sky blue"},
		{"u1", "/mycmd_callback", "called back"},
		// The reference's namespace:name form: the plugin's key first.
		{"u1", "/tester.mycmds:mycmd 3", "3 x 2 = 6 for Ann u1 (u1 in onebot_v11-group_7, adapter 'onebot_v11')"},
		{"u1", "/tester.mycmds:mc 2", "2 x 2 = 4 for Ann u1 (u1 in onebot_v11-group_7, adapter 'onebot_v11')"},
		{"u1", "/tester.mycmds:kv.get colour", "colour is sky blue"},
	} {
		if got := say(c.user, c.text); got != c.want {
			t.Errorf("%s as %s: %q, want %q", c.text, c.user, got, c.want)
		}
	}
	help := say("u1", "/help")
	for _, w := range []string{"/mycmd <n> [times:<k>] - Multiply a number. (also mc)", "/steps [what] - Work in steps.",
		"/kv.set - Set a value. (also kv.put)", "/kv.get - Read a value.", "/pick <colour> - Pick a colour."} {
		if !strings.Contains(help, w) {
			t.Errorf("/help lacks %q:\n%s", w, help)
		}
	}
	for _, w := range []string{"wipeall", "vet", "mycmd_callback"} {
		if strings.Contains(help, "/"+w) {
			t.Errorf("/help for u1 lists /%s:\n%s", w, help)
		}
	}
	if help := say("root1", "/help"); !strings.Contains(help, "/wipeall - Wipe everything.") || !strings.Contains(help, "/vet - Admins only.") {
		t.Errorf("/help for a super user:\n%s", help)
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Errorf("commands made %d model requests", n)
	}
}

// An installed Python plugin that mounts a built-in port's method name
// replaces the port while nekro serves: the API says the port is off and
// why, enabling it is refused with the reason, the sandbox's dice_roll
// is the installed plugin's and the port's other method is gone, the
// installed plugin's command answers and the port's commands are not
// listed. A plugin that did not load is in the API's failed list with
// its file, line and exception.
func TestInstalledPluginReplacesBuiltinWhileServing(t *testing.T) {
	e := startEnv(t, nil, func(o *serveOptions) {
		o.App.PluginDirs = []string{filepath.Join("..", "pyplugin", "testdata", "clash"), filepath.Join("..", "pyplugin", "testdata", "failing")}
		o.App.Agent.SuperUsers = []string{"root1"}
	})
	var list struct {
		Plugins []struct {
			Key      string
			Enabled  bool
			Disabled string `json:"disabled_reason"`
			Commands []struct{ Name, Usage, Permission string }
		}
		Failed []struct {
			Path, File, Exception, Message string
			Line                           int
		}
	}
	if st := e.call("GET", "/api/plugins", nil, &list); st != http.StatusOK {
		t.Fatalf("GET /api/plugins: %d", st)
	}
	seen := 0
	for _, p := range list.Plugins {
		switch p.Key {
		case "nekro.dice":
			seen++
			if p.Enabled || p.Disabled != "replaced by tester.dicey (same method dice_roll)" {
				t.Errorf("nekro.dice: %+v", p)
			}
		case "tester.dicey":
			seen++
			if !p.Enabled || len(p.Commands) != 1 || p.Commands[0].Usage != "/dice_lock" || p.Commands[0].Permission != "super" {
				t.Errorf("tester.dicey: %+v", p)
			}
		case "tester.fine":
			seen++
		}
	}
	if seen != 3 {
		t.Errorf("the list lacks nekro.dice, tester.dicey or tester.fine: %+v", list.Plugins)
	}
	if len(list.Failed) != 1 {
		t.Fatalf("failed: %+v", list.Failed)
	}
	f := list.Failed[0]
	if !strings.HasSuffix(f.Path, "needs_missing.py") || !strings.HasSuffix(f.File, "needs_missing.py") || f.Line != 5 ||
		f.Exception != "ModuleNotFoundError" || !strings.Contains(f.Message, "nekro_agent.api.no_such_module") {
		t.Errorf("failed plugin: %+v", f)
	}

	var out struct{ Error string }
	if st := e.call("POST", "/api/plugins/nekro.dice/enable", nil, &out); st != http.StatusConflict ||
		!strings.Contains(out.Error, "replaced by tester.dicey") {
		t.Errorf("enabling the replaced port: %d %q", st, out.Error)
	}
	var res struct{ Output string }
	code := `print(dice_roll("climb", "the wall", 12))
try:
    probability_wheel("x", "y", {"a": 50.0})
except NameError:
    print("no stub")
import api_caller
try:
    api_caller._conn.call("probability_wheel", "agent", {"event_name": "x", "description": "y", "event_choices": {"a": 50.0}})
except Exception as e:
    print(type(e).__name__, e)
`
	if st := e.call("POST", "/api/chats/c1/exec", map[string]string{"code": code}, &res); st != http.StatusOK {
		t.Fatalf("exec: %d", st)
	}
	for _, w := range []string{"dicey rolled 20 for climb (difficulty 12)", "no stub", "belongs to plugin nekro.dice, which is off: replaced by tester.dicey"} {
		if !strings.Contains(res.Output, w) {
			t.Errorf("exec output lacks %q:\n%s", w, res.Output)
		}
	}

	say := func(user, text string) string {
		t.Helper()
		if st := e.call("POST", "/api/chats/k1/messages", map[string]string{"user_id": user, "text": text}, &out); st != http.StatusAccepted {
			t.Fatalf("%s: %d %s", text, st, out.Error)
		}
		h := e.history("k1")
		return h[len(h)-1].Text
	}
	if got := say("root1", "/dice_lock 7"); got != "dicey locked" {
		t.Errorf("/dice_lock: %q", got)
	}
	if help := say("root1", "/help"); !strings.Contains(help, "/dice_lock - Lock the dice (the operator's way).") ||
		strings.Contains(help, "dice_unlock") || strings.Contains(help, "dice_assert") {
		t.Errorf("/help:\n%s", help)
	}
}
