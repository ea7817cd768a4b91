package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/models"
	"github.com/nekro-go/nekro/internal/presets"
)

// The Models and Personas pages in a real browser: a group added on the
// page and made the default, tested with its button, answers the next
// turn; a persona created on the page and chosen for a chat is in that
// chat's system prompt, which the page shows; no key reaches the page.
func TestUIModelsAndPersonasPagesInABrowser(t *testing.T) {
	e := startEnv(t, func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "from the seed"} }, nil)
	other, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "from " + r.Model} })
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	log, dom := drive(t, e, "token="+testToken+"&view=models", fmt.Sprintf(`
  const cards = () => [...document.querySelectorAll("#model-groups .group")];
  await until("the seeded group", () => cards().length === 1);
  note("seeded key field: " + cards()[0].querySelector('[name="api_key"]').placeholder);
  $("model-add").click();
  const g = cards()[1];
  const set = (name, v) => { g.querySelector('[name="' + name + '"]').value = v; };
  set("name", "ui_group"); set("base_url", %q); set("model", "ui-model"); set("temperature", "0.3");
  g.querySelector('[name="default-group"]').checked = true;
  g.querySelector(".actions button").click(); // Test
  await until("the test's answer", () => g.querySelector(".test-result.ok") || g.querySelector(".test-result.error"));
  note("test: " + g.querySelector(".test-result").textContent);
  $("models-form").requestSubmit();
  await until("saved", () => $("status").textContent.startsWith("Saved"));
  note("groups after saving: " + cards().map((c) => c.querySelector('[name="name"]').value).join(","));

  location.hash = "#view=presets";
  await until("the personas page", () => document.querySelector("#preset-list form"));
  const f = document.querySelector("#preset-list form");
  f.querySelector('[name="name"]').value = "UICat";
  f.querySelector('[name="content"]').value = "You are UICat, who purrs.";
  f.querySelector('[name="tags"]').value = "cat, ui";
  f.requestSubmit();
  await until("the new persona", () => [...document.querySelectorAll("#preset-list h3")].some((h) => h.textContent.startsWith("UICat")));
  $("choice-chat").value = "ui1";
  const opt = [...$("choice-preset").options].find((o) => o.textContent.startsWith("UICat"));
  $("choice-preset").value = opt.value;
  $("preset-choice").requestSubmit();
  await until("the chat's prompt", () => $("chat-prompt").textContent.includes("UICat"));
  note("prompt has the persona: " + $("chat-prompt").textContent.includes("You are UICat, who purrs."));
  note("done");
`, other.URL))
	if v := logLine(t, log, "seeded key field"); v != "stored: leave empty to keep" {
		t.Errorf("the seeded group's key field: %q", v)
	}
	if v := logLine(t, log, "test"); !strings.Contains(v, "from ui-model") {
		t.Errorf("the Test button: %q", v)
	}
	if v := logLine(t, log, "groups after saving"); v != "chat,ui_group" {
		t.Errorf("groups: %q", v)
	}
	if v := logLine(t, log, "prompt has the persona"); v != "true" {
		t.Errorf("the chat's prompt on the page lacks the persona")
	}
	if strings.Contains(dom, "model-key") {
		t.Error("the seeded group's key reached the page")
	}
	var got models.Settings
	if st := e.call("GET", "/api/models", nil, &got); st != http.StatusOK || got.Default != "ui_group" || len(got.Groups) != 2 ||
		!got.Groups[0].HasKey || got.Groups[1].Temperature == nil || *got.Groups[1].Temperature != 0.3 {
		t.Fatalf("the API after the page: %d %+v", st, got)
	}
	var ps struct{ Presets []presets.Preset }
	if st := e.call("GET", "/api/presets", nil, &ps); st != http.StatusOK || len(ps.Presets) != 1 || len(ps.Presets[0].Tags) != 2 {
		t.Fatalf("presets after the page: %d %+v", st, ps)
	}
	// The next turn: the page's group answers, with the page's persona.
	e.post("ui1", "u1", "Ann", "hello")
	turns := e.waitTurns("ui1", 1)
	if turns[0].Status != chat.TurnDone || turns[0].ModelGroup != "ui_group" {
		t.Fatalf("turn: %+v", turns[0])
	}
	reqs := other.RequestsFor("ui1")
	if len(reqs) != 1 || !strings.Contains(reqs[0].Messages[0].Content.String(), "You are UICat, who purrs.") {
		t.Fatalf("the page's group and persona did not answer the turn: %d requests", len(reqs))
	}
	// The chat page says which group answered.
	log, _ = drive(t, e, "token="+testToken+"&chat=ui1", `
    await opened("ui1", "assistant");
    const turn = await until("the turn", () => document.querySelector("#messages > li.turn"));
    note("summary: " + turn.querySelector("summary").textContent);
    note("done");
`)
	mustContain(t, "the turn's summary", logLine(t, log, "summary"), "answered by model group ui_group")
}
