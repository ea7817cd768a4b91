package server_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
)

// The run log and the dashboard in a real browser: the log lists every
// chat's runs, finds one by a word of its output and shows its record;
// the dashboard draws its charts as SVG from the numbers it was given and
// ranks chats, plugins and methods.
func TestUIRunLogAndDashboardInABrowser(t *testing.T) {
	chromiumPath(t)
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply {
		return llmtest.Code(`print("the aardvark of " + _ck)
send_msg_text(_ck, "done")`)
	}, nil)
	e.post("chat-one", "op", "Op", "hello")
	e.waitTurns("chat-one", 1)
	if st := e.call("POST", "/api/chats/chat-two/exec", map[string]string{"code": `print("a quokka smiles")`}, nil); st != http.StatusOK {
		t.Fatalf("exec: %d", st)
	}

	log, dom := drive(t, e, "token="+testToken+"&view=runs", `
    const rows = () => [...document.querySelectorAll("#run-rows tr")];
    await until("the run list", () => rows().length >= 2);
    note("listed: " + rows().map((r) => r.dataset.chat).join(","));
    $("rf-q").value = "quokka";
    $("run-filters").requestSubmit();
    await until("the search", () => rows().length === 1 && rows()[0].dataset.chat === "chat-two");
    note("found: " + rows().map((r) => r.dataset.chat).join(","));
    rows()[0].querySelector("button.run-link").click();
    await until("the run's record", () => !$("run-detail").hidden);
    note("output: " + $("run-detail").querySelector(".run-output").textContent.trim());
    note("code: " + $("run-detail").querySelector(".run-code").textContent.trim());
    $("rf-q").value = "no-such-word-anywhere";
    $("run-filters").requestSubmit();
    await until("an empty search", () => rows().length === 0 && !$("runs-empty").hidden);
    note("empty: " + $("runs-empty").textContent);

    location.hash = "#view=dashboard";
    await until("the charts", () => document.querySelectorAll("#dash-charts svg.chart").length >= 4 && document.querySelectorAll("#dash-charts rect.bar").length > 0);
    note("charts: " + document.querySelectorAll("#dash-charts svg.chart").length);
    note("bars: " + [...document.querySelectorAll("#dash-charts rect.bar title")].map((t) => t.textContent).join("; "));
    note("totals: " + [...document.querySelectorAll("#dash-totals div")].map((d) => d.querySelector("dt").textContent + "=" + d.querySelector("dd").textContent).join(", "));
    note("ranks: " + [...document.querySelectorAll("#dash-ranks tbody tr")].map((tr) => [...tr.children].map((td) => td.textContent).join(" ")).join("; "));
    note("done");
`)
	if got := logLine(t, log, "listed"); got != "chat-two,chat-one" {
		t.Errorf("the run log lists runs of %s", got)
	}
	if got := logLine(t, log, "found"); got != "chat-two" {
		t.Errorf("searching quokka found runs of %s", got)
	}
	if got := logLine(t, log, "output"); got != "a quokka smiles" {
		t.Errorf("the run's output: %q", got)
	}
	mustContain(t, "the run's code", logLine(t, log, "code"), `print("a quokka smiles")`)
	if n, _ := strconv.Atoi(logLine(t, log, "charts")); n < 4 {
		t.Errorf("%d charts", n)
	}
	bars := logLine(t, log, "bars")
	for _, want := range []string{"turns: 1", "runs: 2", "requests: 1"} {
		mustContain(t, "the charts' bars", bars, want)
	}
	totals := logLine(t, log, "totals")
	for _, want := range []string{"turns=1", "runs=2", "model requests=1", "plugin calls=1"} {
		mustContain(t, "the totals", totals, want)
	}
	ranks := logLine(t, log, "ranks")
	for _, want := range []string{"chat-one 1 1 0 1", "chat-two 0 1 0 0", "nekro.basic 1 0", "send_msg_text 1 0"} {
		mustContain(t, "the rankings", ranks, want)
	}
	if !strings.Contains(dom, `<svg viewBox="0 0 640 180" role="img" class="chart"`) {
		t.Errorf("no chart in the page's DOM")
	}
}

// Signing out and in on one browser: the operator signing in after a
// user logged out does not keep that user's id and name (and so does not
// post as them), and the token field and Sign-in button are shown only
// while signed out.
func TestUISignOutForgetsTheUser(t *testing.T) {
	chromiumPath(t)
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply {
		return llmtest.Code(`send_msg_text(_ck, "hello in " + _ck)`)
	}, nil)
	var u struct{ Token string }
	if st := e.call("POST", "/api/users", map[string]string{"user_id": "alice", "name": "Alice A."}, &u); st != http.StatusCreated {
		t.Fatalf("POST /api/users: %d", st)
	}
	log, _ := drive(t, e, "token="+u.Token, `
    const shown = (el) => el.getClientRects().length > 0;
    const fields = () => "user=" + $("user").value + " name=" + $("name").value +
      " stored=" + localStorage.getItem("nekro.user") + "/" + localStorage.getItem("nekro.name") +
      " sign-in shown=" + shown($("token")) + "," + shown(document.querySelector('#connect button[type="submit"]')) + " logout shown=" + shown($("logout"));
    await until("alice signed in", () => $("who").textContent.includes("alice"));
    note("as alice: " + fields());
    $("logout").click();
    note("signed out: " + fields());
    $("token").value = "`+testToken+`";
    $("connect").requestSubmit();
    await until("the operator signed in", () => $("who").textContent.includes("operator"));
    note("as operator: " + fields());
    $("new-chat-key").value = "op-chat";
    $("new-chat").requestSubmit();
    await until("op-chat open", () => $("chat-title").textContent === "op-chat" && !$("send-fields").disabled);
    $("text").value = "from the operator";
    $("send").requestSubmit();
    await until("the answer", () => messages("assistant").length > 0);
    note("done");
`)
	if got := logLine(t, log, "as alice"); got != "user=alice name=Alice A. stored=alice/Alice A. sign-in shown=false,false logout shown=true" {
		t.Errorf("signed in as alice: %s", got)
	}
	if got := logLine(t, log, "signed out"); got != "user=web-user name=You stored=null/null sign-in shown=true,true logout shown=false" {
		t.Errorf("signed out: %s", got)
	}
	if got := logLine(t, log, "as operator"); got != "user=web-user name=You stored=web-user/You sign-in shown=false,false logout shown=true" {
		t.Errorf("the operator after alice: %s", got)
	}
	for _, m := range e.history("op-chat") {
		if m.Role == "user" && (m.SenderID == "alice" || m.SenderName == "Alice A.") {
			t.Errorf("the operator posted as alice: %+v", m)
		}
	}
}
