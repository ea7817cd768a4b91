package server_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/knowledge/knowledgetest"
	"github.com/nekro-go/nekro/internal/llm"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
)

// The Knowledge page in a real browser: a PDF and a Markdown file
// uploaded to one chat's scope are imported (the list follows them to
// ready), found by the page's search as that chat and not as another,
// and deleted from the page; a user's token does not see the page.
func TestUIKnowledgePageInABrowser(t *testing.T) {
	e := startEnv(t, func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "OK"} }, func(o *serveOptions) {
		o.App.ModelGroups = llm.GroupsFrom(o.App.LLM, map[string]string{"NEKRO_LLM_EMBEDDING_MODEL": "embedder"})
	})
	pdf := base64.StdEncoding.EncodeToString(knowledgetest.PDF("The lighthouse keeper's cat is called Biscuit."))
	log, _ := drive(t, e, "token="+testToken+"&view=knowledge", fmt.Sprintf(`
  window.confirm = () => true;
  await until("the page", () => !$("kb-empty").hidden);
  const bytes = Uint8Array.from(atob(%q), (c) => c.charCodeAt(0));
  const dt = new DataTransfer();
  dt.items.add(new File([bytes], "lighthouse.pdf", { type: "application/pdf" }));
  dt.items.add(new File(["# Tides\n\nHigh tide at the harbour is at noon on Sundays."], "tides.md", { type: "text/markdown" }));
  $("kb-file").files = dt.files;
  $("kb-scope").value = "chat";
  $("kb-scope").dispatchEvent(new Event("change"));
  $("kb-chat").value = "harbour";
  $("kb-upload").requestSubmit();
  const rows = () => [...document.querySelectorAll("#kb-docs tr")];
  await until("two rows", () => rows().length === 2);
  await until("both ready", () => { $("kb-reload").click(); return rows().length === 2 && rows().every((r) => r.dataset.status === "ready"); });
  note("rows: " + rows().map((r) => r.querySelector(".kb-name").textContent + "@" + r.children[0].textContent).sort().join(","));

  $("kb-search-chat").value = "harbour";
  $("kb-query").value = "what is the lighthouse cat called";
  $("kb-search").requestSubmit();
  await until("results", () => $("kb-results").children.length > 0);
  note("as harbour: " + $("kb-results").children[0].querySelector("strong").textContent);
  $("kb-search-chat").value = "elsewhere";
  $("kb-results").replaceChildren();
  $("kb-search").requestSubmit();
  await until("results elsewhere", () => $("kb-results").children.length > 0);
  note("as elsewhere: " + $("kb-results").textContent.includes("Biscuit"));

  rows().find((r) => r.querySelector(".kb-name").textContent === "lighthouse.pdf").querySelector("button").click();
  await until("deleted", () => rows().length === 1);
  note("left: " + rows()[0].querySelector(".kb-name").textContent);
  note("done");
`, pdf))
	if v := logLine(t, log, "rows"); v != "lighthouse.pdf@chat:harbour,tides.md@chat:harbour" {
		t.Errorf("rows: %q", v)
	}
	if v := logLine(t, log, "as harbour"); v != "lighthouse.pdf" {
		t.Errorf("the harbour's search found %q first", v)
	}
	if v := logLine(t, log, "as elsewhere"); v != "false" {
		t.Errorf("another chat's search found the harbour's PDF")
	}
	if v := logLine(t, log, "left"); v != "tides.md" {
		t.Errorf("after the delete: %q", v)
	}
	var list struct{ Documents []struct{ Name string } }
	if st := e.call("GET", "/api/knowledge", nil, &list); st != http.StatusOK || len(list.Documents) != 1 || !strings.HasPrefix(list.Documents[0].Name, "tides") {
		t.Fatalf("the API after the page: %d %+v", st, list)
	}
}
