package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// reloadCounter is a Python plugin that notes each import of its file
// in imports.log beside it, so a test sees when it was loaded again.
const reloadCounter = `import os
from nekro_agent.api.plugin import NekroPlugin, SandboxMethodType

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "imports.log"), "a") as f:
    f.write("imported\n")

plugin = NekroPlugin(name="Counter", module_name="counter", description="counts its imports", version="1.0", author="tester",
                     url="https://example.org")


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "count_me")
async def count_me(_ctx) -> int:
    """One."""
    return 1
`

// The Plugins page's Reload button, in a real browser: shown on the
// Python plugin only (a compiled-in plugin cannot be reloaded), it loads
// the plugin again from its files (its module runs again) and the page
// lists the plugin afterwards.
func TestUIReloadButtonInABrowser(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "counter.py"), []byte(reloadCounter), 0o644); err != nil {
		t.Fatal(err)
	}
	e := startEnv(t, nil, func(o *serveOptions) { o.App.PluginDirs = []string{dir} })
	imports := func() int {
		b, _ := os.ReadFile(filepath.Join(dir, "imports.log"))
		return strings.Count(string(b), "imported")
	}
	before := imports()
	log, _ := drive(t, e, "token="+testToken+"&view=plugins", `
  const card = (key) => document.querySelector('#plugin-list article[data-key="' + key + '"]');
  await until("the plugin list", () => card("tester.counter"));
  note("buttons: " + [...document.querySelectorAll("#plugin-list article")].filter((a) => a.querySelector("button.reload")).map((a) => a.dataset.key).join(","));
  card("tester.counter").querySelector("button.reload").click();
  await until("the reload", () => $("status").textContent.includes("reloaded"));
  note("status: " + $("status").textContent);
  note("listed after: " + Boolean(card("tester.counter")));
  note("done");
`)
	if v := logLine(t, log, "buttons"); v != "tester.counter" {
		t.Errorf("Reload buttons on %q, want on the Python plugin only", v)
	}
	if v := logLine(t, log, "status"); v != "tester.counter reloaded" {
		t.Errorf("status after Reload: %q", v)
	}
	if v := logLine(t, log, "listed after"); v != "true" {
		t.Errorf("the plugin is not listed after its reload")
	}
	if after := imports(); after != before+1 {
		t.Errorf("the plugin's module ran %d times during the page, want once (the reload)", after-before)
	}
}
