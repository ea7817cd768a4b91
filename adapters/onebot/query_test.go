package onebot_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

// probePlugin is a Python plugin written as the reference's plugins reach
// the OneBot bot: get_bot() and its call_api or bot.<action>(), and the
// chat's adapter's get_self_info().
const probePlugin = `
from nekro_agent.adapters.onebot_v11.core.bot import get_bot
from nekro_agent.api.plugin import NekroPlugin, SandboxMethodType
from nekro_agent.api.schemas import AgentCtx

plugin = NekroPlugin(name="bot probe", module_name="obprobe", description="asks the OneBot bot",
                     version="1.0.0", author="tester", url="https://example.org")


async def attempt(coro):
    try:
        return "ok %s" % (await coro,)
    except Exception as e:
        return "%s: %s" % (type(e).__name__, e)


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "probe the bot")
async def ob_probe(_ctx: AgentCtx) -> str:
    bot = get_bot()
    login = await bot.call_api("get_login_info")
    me = await _ctx.adapter.get_self_info()
    out = ["self %s %s" % (me.user_id, me.user_name), "login %s" % login["user_id"]]
    kind, target = _ctx.channel_id.split("_", 1)
    if kind == "group":
        gid = int(target)
        out.append("group %s" % (await bot.get_group_info(group_id=gid))["group_name"])
        out.append("members %d" % len(await bot.call_api("get_group_member_list", group_id=gid)))
        out.append("member42 %s" % (await bot.get_group_member_info(group_id=gid, user_id=42))["nickname"])
        out.append("stranger42 %s" % (await bot.get_stranger_info(user_id="42"))["nickname"])
        out.append("other group: " + await attempt(bot.get_group_info(group_id=300)))
        out.append("other member: " + await attempt(bot.get_group_member_info(group_id=300, user_id=42)))
        out.append("outsider: " + await attempt(bot.get_stranger_info(user_id=77)))
        out.append("card: " + await attempt(bot.set_group_card(group_id=gid, user_id=42, card="x")))
        out.append("ban: " + await attempt(bot.call_api("set_group_ban", group_id=gid, user_id=42, duration=60)))
    else:
        out.append("me %s" % (await bot.get_stranger_info(user_id=int(target)))["nickname"])
        out.append("other user: " + await attempt(bot.get_stranger_info(user_id=43)))
        out.append("group: " + await attempt(bot.get_group_info(group_id=200)))
        out.append("send: " + await attempt(bot.send_private_msg(user_id=int(target), message="hi")))
    return "\n".join(out)
`

// A Python plugin asks the OneBot bot through the real binary, as the
// reference's plugins do (get_bot().call_api, bot.get_group_info,
// _ctx.adapter.get_self_info): the read-only actions answer for the run's
// own chat; another group, a user outside the chat, and any action that
// sends or administers are refused with a clear error and never reach
// the implementation; in a chat of no platform the bot is not available.
func TestPythonPluginQueriesTheBot(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "obprobe.py"), []byte(probePlugin), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(r.Last(), "probe the bot") {
			return llmtest.Code(`send_msg_text(_ck, ob_probe())`)
		}
		return llmtest.Code(`send_msg_text(_ck, "?")`)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	srv := testutil.Serve(t, testutil.DataDir(t), "api-tok", "NEKRO_LLM_BASE_URL="+m.URL, "NEKRO_LLM_MODEL=scripted",
		"NEKRO_ONEBOT_TOKEN=ob-secret", "NEKRO_ONEBOT_ACTION_TIMEOUT=2s", "NEKRO_PLUGIN_DIR="+dir)
	ws, _, err := dialReverse(srv.Addr, reverseHeaders("ob-secret"))
	if err != nil {
		t.Fatalf("reverse connection: %v\n%s", err, srv.Logs)
	}
	defer ws.CloseNow()
	s := newSim(t, ws)
	s.waitAction("get_login_info")

	// The group: every action the implementation receives until the
	// answer is read-only and about group 200.
	s.groupMessage(200, 42, "alice", seg("at", map[string]any{"qq": fmt.Sprint(selfID)}), seg("text", map[string]any{"text": " probe the bot"}))
	var seen []string
	var answer string
	for deadline := time.After(90 * time.Second); answer == ""; {
		select {
		case a, ok := <-s.actions:
			if !ok {
				t.Fatal("the connection closed")
			}
			if a.Action == "send_group_msg" {
				answer = parseSend(t, a).text()
				break
			}
			seen = append(seen, a.Action+" "+string(a.Params))
		case <-deadline:
			t.Fatalf("no answer in the group; actions %q\n%s", seen, srv.Logs)
		}
	}
	t.Logf("group answer:\n%s\nactions: %q", answer, seen)
	for _, want := range []string{
		"self 999 Nekko", "login 999", "group group 200", "members 2", "member42 member 42", "stranger42 stranger 42",
		"other group: HostError: OneBot get_group_info: query refused: group 300 is not the chat's group (200)",
		"other member: HostError: OneBot get_group_member_info: query refused: group 300 is not the chat's group (200)",
		"outsider: HostError: OneBot get_stranger_info: query refused: user 77 is not a member of the chat's group 200",
		"card: HostError: OneBot set_group_card: query refused: only the read-only actions",
		"ban: HostError: OneBot set_group_ban: query refused",
	} {
		if !strings.Contains(answer, want) {
			t.Errorf("the group answer lacks %q:\n%s", want, answer)
		}
	}
	for _, a := range seen {
		if strings.Contains(a, "300") || strings.HasPrefix(a, "set_") || (strings.HasPrefix(a, "get_stranger_info") && strings.Contains(a, "77")) {
			t.Errorf("a refused action reached the implementation: %s", a)
		}
	}

	// The private chat of user 42: only that user.
	s.privateMessage(42, "alice", "probe the bot")
	p := parseSend(t, s.waitAction("send_private_msg"))
	t.Logf("private answer:\n%s", p.text())
	for _, want := range []string{
		"self 999 Nekko", "me stranger 42",
		"other user: HostError: OneBot get_stranger_info: query refused: user 43 is not the private chat's user (42)",
		"group: HostError: OneBot get_group_info: query refused: chat onebot_v11-private_42 is not a group",
		"send: HostError: OneBot send_private_msg: query refused",
	} {
		if !strings.Contains(p.text(), want) {
			t.Errorf("the private answer lacks %q:\n%s", want, p.text())
		}
	}
	if p.UserID != 42 {
		t.Errorf("the private answer went to %d", p.UserID)
	}

	// A chat of no platform: the bot is not available, saying why.
	st, body := srv.API("POST", "/api/chats/c1/exec", map[string]string{"user_id": "u1", "code": `
try:
    print(ob_probe())
except Exception as e:
    print("ERR", e)
`})
	if st != http.StatusOK {
		t.Fatalf("exec: %d %s", st, body)
	}
	var res struct {
		Output string `json:"output"`
	}
	json.Unmarshal([]byte(body), &res)
	if !strings.Contains(res.Output, "NotAvailableError") && !strings.Contains(res.Output, "not available in nekro") {
		t.Errorf("in a chat of no platform: %s", body)
	}
	if !strings.Contains(res.Output, "a chat of no platform, not a OneBot v11 chat") {
		t.Errorf("the error does not say why: %s", body)
	}
}
