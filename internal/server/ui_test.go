package server_test

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/server"
	"github.com/nekro-go/nekro/plugin"
)

// pngCode writes a real 2x2 PNG to /app/shared and sends it to the chat.
const pngCode = `
import struct, zlib
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
raw = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
open("/app/shared/dot.png", "wb").write(png)
open("/app/shared/page.html", "w").write("<script>alert(1)</script>")
send_msg_text(_ck, "hello from the sandbox")
send_msg_file(_ck, "/app/shared/dot.png")
send_msg_file(_ck, "/app/shared/page.html")
`

func TestUIIsServedWithoutTokenAndUploadsNeedOne(t *testing.T) {
	e := startEnv(t, nil, nil)
	resp, err := http.Get(e.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), `<script src="/ui/app.js"`) ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
		t.Fatalf("GET /: %d %q csp %q", resp.StatusCode, page[:min(len(page), 80)], resp.Header.Get("Content-Security-Policy"))
	}
	if resp, err := http.Get(e.base + "/ui/app.js"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /ui/app.js: %v %v", resp, err)
	}

	if st := e.call("POST", "/api/chats/webchat/exec", map[string]string{"code": pngCode, "user_id": "u"}, nil); st != 200 {
		t.Fatalf("exec: %d", st)
	}
	get := func(path, token string) (*http.Response, []byte) {
		req, _ := http.NewRequest("GET", e.base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	// The attachment names come from the history.
	var hist struct {
		Messages []struct {
			Attachments []struct{ Name, Kind string } `json:"attachments"`
		} `json:"messages"`
	}
	e.call("GET", "/api/chats/webchat/messages", nil, &hist)
	names := map[string]string{}
	for _, m := range hist.Messages {
		for _, a := range m.Attachments {
			names[a.Kind] = a.Name
		}
	}
	if names["image"] == "" || names["file"] == "" {
		t.Fatalf("attachments %v", names)
	}
	resp, body := get("/api/chats/webchat/uploads/"+names["image"], testToken)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" || !strings.HasPrefix(string(body), "\x89PNG") {
		t.Errorf("image upload: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// HTML a sandbox wrote never renders in the API's origin.
	resp, _ = get("/api/chats/webchat/uploads/"+names["file"], testToken)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Errorf("html upload served inline: %d %v", resp.StatusCode, resp.Header)
	}
	for path, want := range map[string]int{
		"/api/chats/webchat/uploads/" + names["image"]: http.StatusUnauthorized, // no token
		"/api/chats/webchat/uploads/..%2Fnekro.db":     http.StatusBadRequest,
		"/api/chats/webchat/uploads/missing.png":       http.StatusNotFound,
		"/api/chats/other/uploads/" + names["image"]:   http.StatusNotFound,
	} {
		token := testToken
		if want == http.StatusUnauthorized {
			token = ""
		}
		if resp, _ := get(path, token); resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// chromiumPath finds the browser the UI tests drive, or skips the test
// without it (fails on CI, where make test installs it).
func chromiumPath(t *testing.T) string {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed: make test installs it")
		}
		t.Skip("chromium is not installed (make test installs it)")
	}
	return chromium
}

// dumpDOM opens url in headless Chromium, lets the page run for budget of
// virtual time (paused while requests are pending) and returns its DOM.
func dumpDOM(t *testing.T, chromium, page string, budget time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	// The browser's own temporary files (its singleton socket among them,
	// whose path must stay short) go to a directory removed afterwards.
	tmp, err := os.MkdirTemp("", "chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+filepath.Join(tmp, "profile"), fmt.Sprintf("--virtual-time-budget=%d", budget.Milliseconds()), "--dump-dom",
		page)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	dom, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("chromium: %v\n%s", err, stderr)
	}
	return string(dom)
}

// The page, in a real headless browser, shows a chat's history with its
// image attachment, from a link carrying the token in its fragment.
func TestUIShowsTheChatInABrowser(t *testing.T) {
	chromium := chromiumPath(t)
	e := startEnv(t, nil, nil)
	if st := e.call("POST", "/api/chats/webchat/exec", map[string]string{"code": pngCode, "user_id": "u"}, nil); st != 200 {
		t.Fatalf("exec: %d", st)
	}
	dom := dumpDOM(t, chromium, e.base+"/#token="+testToken+"&chat=webchat", 5*time.Second)
	list := regexp.MustCompile(`(?s)<ol id="messages">.*?</ol>`).FindString(dom)
	if !strings.Contains(list, "hello from the sandbox") || !regexp.MustCompile(`<img alt="[^"]+\.png" src="blob:`).MatchString(list) {
		t.Errorf("the page does not show the chat:\n%s", list)
	}
}

// A plugin whose settings take every kind of field the plugins page
// generates, and whose texts are HTML the page must show as text.
type formKindsSettings struct {
	Notes    string            `json:"notes" title:"Notes" multiline:"true"`
	Internal string            `json:"internal" hidden:"true"`
	Verbose  bool              `json:"verbose" title:"Verbose"`
	Ratio    float64           `json:"ratio" min:"0" max:"1"`
	Mode     string            `json:"mode" choices:"fast,slow"`
	Labels   map[string]string `json:"labels"`
	Tags     []string          `json:"tags"`
}

var formKinds = func() *plugin.Plugin {
	p := plugin.New(plugin.Meta{Name: "Form kinds", ModuleName: "formkinds", Author: "tester", Version: "1.0.0",
		Description: `Settings of <i id="injected">every</i> kind`})
	plugin.MountConfig(p, formKindsSettings{Internal: "hidden-value-4711", Ratio: 0.5, Mode: "fast", Tags: []string{"a"}})
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "kinds_echo", Description: "Echo.",
		Doc: `Answer <img src="x" id="injected-doc"> as text.`},
		func(ctx *plugin.Ctx, _ struct{}) (string, error) { return "echo", nil })
	return p
}()

// driveScript plays the operator on the plugins page: it turns
// tester.switchable off with its switch and fills in settings forms as a
// user types, then writes what it did into #drive-log for the test to read
// in the dumped DOM.
const driveScript = `"use strict";
(async () => {
  const log = document.createElement("pre");
  log.id = "drive-log";
  document.body.append(log);
  const note = (s) => { log.textContent += s + "\n"; };
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const until = async (what, f) => {
    for (let i = 0; i < 400; i++) {
      const v = f();
      if (v) return v;
      await sleep(25);
    }
    throw new Error("gave up waiting for " + what);
  };
  const card = (key) => document.querySelector('article.plugin[data-key="' + key + '"]');
  const form = (key) => card(key).querySelector("form.settings");
  const field = (key, name) => form(key).querySelector('[data-field="' + name + '"]');
  const input = (key, name) => field(key, name).querySelector("input, select, textarea");
  const type = (key, name, text) => {
    const i = input(key, name);
    i.value = text;
    i.dispatchEvent(new Event("input", { bubbles: true }));
  };
  const result = (key) => form(key).querySelector(".result").textContent;
  const fieldError = (key, name) => field(key, name).querySelector(".field-error").textContent;
  const save = (key) => form(key).querySelector('button[type="submit"]').click();
  try {
    await until("the plugin list", () => ["tester.greeter", "tester.switchable", "tester.formkinds", "tester.pyweather"].every(card));
    note("listed");

    card("tester.switchable").querySelector("input.enable").click();
    await until("the switch's answer", () => card("tester.switchable").dataset.enabled === "false");
    note("switched off: " + card("tester.switchable").querySelector(".state").textContent);

    type("tester.greeter", "greeting", "ahoy from the browser");
    save("tester.greeter");
    await until("the greeting saved", () => result("tester.greeter").startsWith("Saved"));
    note("greeter: " + result("tester.greeter"));

    type("tester.greeter", "times", "9");
    save("tester.greeter");
    await until("times refused", () => fieldError("tester.greeter", "times"));
    note("times: " + fieldError("tester.greeter", "times") + " / " + result("tester.greeter"));

    type("tester.formkinds", "notes", "line one\nline two");
    input("tester.formkinds", "verbose").click();
    type("tester.formkinds", "ratio", "0.25");
    const mode = input("tester.formkinds", "mode");
    mode.value = [...mode.options].find((o) => o.textContent === "slow").value;
    mode.dispatchEvent(new Event("change", { bubbles: true }));
    type("tester.formkinds", "labels", '{"env": "prod"}');
    type("tester.formkinds", "tags", "[oops");
    save("tester.formkinds");
    await until("bad JSON refused", () => fieldError("tester.formkinds", "tags"));
    note("tags: " + fieldError("tester.formkinds", "tags") + " / " + result("tester.formkinds"));
    type("tester.formkinds", "tags", '["a", "b"]');
    save("tester.formkinds");
    await until("the kinds saved", () => result("tester.formkinds").startsWith("Saved"));
    note("formkinds: " + result("tester.formkinds"));

    const secrets = [...document.querySelectorAll('#plugin-list input[type="password"]')].map((i) => i.value);
    note("secret fields: " + JSON.stringify(secrets));
    // Every control's live value, into the DOM the test searches for the secret.
    note("values: " + JSON.stringify([...document.querySelectorAll("#plugin-list :is(input, select, textarea)")].map((i) => i.value)));
    note("done");
  } catch (e) {
    note("error: " + e.message);
  }
})();
`

// drivenPage serves the UI through a proxy that adds script to the page,
// from the page's own origin so its CSP lets the script run, and returns
// the proxy's address.
func drivenPage(t *testing.T, e *env, script string) string {
	t.Helper()
	target, err := url.Parse(e.base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ui/drive-sleep":
			// A wait in real time: the browser's virtual clock stands
			// still while a request is pending, so the driver waits on
			// the server (a turn, a model) by asking for this.
			time.Sleep(50 * time.Millisecond)
			w.WriteHeader(http.StatusNoContent)
		case "/ui/drive.js":
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
			io.WriteString(w, script)
		case "/":
			resp, err := http.Get(e.base + "/")
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			page, _ := io.ReadAll(resp.Body)
			tag := `<script src="/ui/app.js" defer></script>`
			if !bytes.Contains(page, []byte(tag)) {
				t.Errorf("the page does not load %s", tag)
			}
			page = bytes.Replace(page, []byte(tag), []byte(tag+`<script src="/ui/drive.js" defer></script>`), 1)
			for k, v := range resp.Header {
				w.Header()[k] = v
			}
			w.Header().Del("Content-Length")
			w.WriteHeader(resp.StatusCode)
			w.Write(page)
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// The plugins page, in a real headless browser: it lists every plugin with
// its methods, turns one off with its switch, and changes settings through
// forms generated from their schemas, showing a refused value next to its
// field; a secret never reaches the page, and an empty secret field keeps
// it; a Python plugin that did not load is listed with why.
func TestUIPluginsPageInABrowser(t *testing.T) {
	chromium := chromiumPath(t)
	e := startEnv(t, nil, func(o *serveOptions) {
		o.App.PluginDirs = []string{pyPlugins}
		o.App.Host.Plugins = append(pluginhost.Registered(), greeter, switchable, formKinds)
	})
	const secret = "s3cret-never-shown-0815"
	if st := e.call("PUT", "/api/plugins/tester.greeter/config", map[string]any{"token": secret}, nil); st != http.StatusOK {
		t.Fatalf("PUT greeter token: %d", st)
	}
	type pluginInfo struct {
		Key     string `json:"key"`
		Enabled bool   `json:"enabled"`
		Config  *struct {
			Values map[string]any `json:"values"`
		} `json:"config"`
	}
	plugins := func() map[string]pluginInfo {
		t.Helper()
		var list struct{ Plugins []pluginInfo }
		if st := e.call("GET", "/api/plugins", nil, &list); st != http.StatusOK {
			t.Fatalf("GET /api/plugins: %d", st)
		}
		out := map[string]pluginInfo{}
		for _, p := range list.Plugins {
			out[p.Key] = p
		}
		return out
	}
	before := plugins()
	if !before["tester.switchable"].Enabled {
		t.Fatalf("switchable starts disabled: %+v", before["tester.switchable"])
	}

	dom := dumpDOM(t, chromium, drivenPage(t, e, driveScript)+"/#token="+testToken+"&view=plugins", 20*time.Second)
	log := html.UnescapeString(regexp.MustCompile(`(?s)<pre id="drive-log">(.*?)</pre>`).FindStringSubmatch(dom + `<pre id="drive-log"></pre>`)[1])
	if !strings.Contains(log, "\ndone\n") {
		t.Fatalf("the page was not driven to the end:\n%s\n\nDOM:\n%s", log, dom)
	}
	t.Logf("drive log:\n%s", log)

	// Every plugin is listed, with its methods' signatures and docs.
	card := func(key string) string {
		t.Helper()
		c := regexp.MustCompile(`(?s)<article[^>]*data-key="` + regexp.QuoteMeta(key) + `"[^>]*>.*?</article>`).FindString(dom)
		if c == "" {
			t.Fatalf("no card for %s in the page:\n%s", key, dom)
		}
		return c
	}
	field := func(card, name string) string {
		return regexp.MustCompile(`(?s)<div class="field[^"]*" data-field="` + regexp.QuoteMeta(name) + `">.*?</div>`).FindString(card)
	}
	for key := range before {
		card(key)
	}
	greeterCard := card("tester.greeter")
	mustContain(t, "greeter's card", html.UnescapeString(greeterCard), "greet() -> str")
	mustContain(t, "greeter's card", greeterCard, "Greet as the settings say.")
	mustContain(t, "pyweather's card", html.UnescapeString(card("tester.pyweather")), "weather_settings() -> str")

	// The switch: the page shows the new state, the API agrees.
	if c := card("tester.switchable"); !strings.Contains(c, `data-enabled="false"`) || !strings.Contains(c, "disabled") {
		t.Errorf("switchable's card after the switch:\n%s", c)
	}
	after := plugins()
	if after["tester.switchable"].Enabled {
		t.Errorf("the API says switchable is still enabled")
	}
	if !after["tester.greeter"].Enabled || !after["tester.formkinds"].Enabled {
		t.Errorf("other plugins were switched: %+v", after)
	}

	// The greeting changed; the out-of-range times was refused next to its
	// field and changed nothing.
	values := after["tester.greeter"].Config.Values
	if values["greeting"] != "ahoy from the browser" || values["times"] != 1.0 || values["token"] != "********" {
		t.Errorf("greeter's settings after the page: %v", values)
	}
	if f := field(greeterCard, "times"); !regexp.MustCompile(`class="field-error"[^>]*>setting times: must be at most 5, got 9<`).MatchString(f) ||
		!strings.Contains(f, `type="number"`) || !strings.Contains(f, `min="1"`) || !strings.Contains(f, `max="5"`) {
		t.Errorf("the times field does not show the refusal:\n%s", f)
	}
	// The empty secret field sent nothing: the plugin still has its token.
	var res struct{ Output string }
	if st := e.call("POST", "/api/chats/c1/exec", map[string]string{"code": "print(greet())"}, &res); st != http.StatusOK ||
		strings.TrimSpace(res.Output) != "ahoy from the browser true" {
		t.Errorf("greet after the page: %d %q", st, res.Output)
	}
	// The secret (and a hidden setting) never reached the page.
	for _, s := range []string{secret, "hidden-value-4711"} {
		if strings.Contains(dom, s) {
			t.Errorf("the page's DOM holds %q", s)
		}
	}
	if !regexp.MustCompile(`\nsecret fields: \[""(,"")+\]\n`).MatchString(log) { // greeter's and pyweather's
		t.Errorf("secret fields hold values:\n%s", log)
	}
	if f := field(greeterCard, "token"); !strings.Contains(f, `type="password"`) || strings.Contains(f, "value=") || !strings.Contains(f, "set (hidden)") {
		t.Errorf("the secret field:\n%s", f)
	}

	// Every kind of field, generated from the schema.
	kinds := card("tester.formkinds")
	for name, want := range map[string]string{
		"notes":   "<textarea",
		"verbose": `type="checkbox"`,
		"ratio":   `type="number"`,
		"mode":    "<select",
		"labels":  `class="json"`,
		"tags":    `class="json"`,
	} {
		if f := field(kinds, name); !strings.Contains(f, want) {
			t.Errorf("field %s lacks %s:\n%s", name, want, f)
		}
	}
	if strings.Contains(kinds, `data-field="internal"`) {
		t.Errorf("the hidden setting is shown:\n%s", kinds)
	}
	mustContain(t, "drive log", log, "tags: not valid JSON")
	if v := after["tester.formkinds"].Config.Values; fmt.Sprint(v) != "map[internal:hidden-value-4711 labels:map[env:prod] mode:slow notes:line one\nline two ratio:0.25 tags:[a b] verbose:true]" {
		t.Errorf("formkinds' settings after the page: %v", v)
	}
	weather := card("tester.pyweather")
	for name, want := range map[string]string{"API_KEY": `type="password"`, "TIMEOUT": `max="60"`, "UNITS": "<select", "CITIES": `class="json"`} {
		if f := field(weather, name); !strings.Contains(f, want) {
			t.Errorf("pyweather's %s lacks %s:\n%s", name, want, f)
		}
	}
	// The plugin directory's file that defines no plugin is listed as not
	// loaded, with nekro's reason.
	failed := regexp.MustCompile(`(?s)<section id="plugin-failed"[^>]*>.*?</section>`).FindString(dom)
	if open, _, _ := strings.Cut(failed, ">"); strings.Contains(open, "hidden") || !strings.Contains(failed, "Not loaded (1)") ||
		!regexp.MustCompile(`<article class="plugin failed" data-path="[^"]*/broken\.py">`).MatchString(failed) ||
		!strings.Contains(failed, "MissingPluginInstance: ") || !strings.Contains(failed, "defines no module-level `plugin`") {
		t.Errorf("the plugin that did not load is not shown:\n%s", failed)
	}
	// Plugin texts are text, never markup.
	if strings.Contains(dom, `<i id="injected"`) || strings.Contains(dom, `<img src="x"`) || !strings.Contains(kinds, `&lt;i id="injected"&gt;every&lt;/i&gt;`) ||
		!strings.Contains(kinds, `&lt;img src="x" id="injected-doc"&gt;`) {
		t.Errorf("plugin texts became markup:\n%s", kinds)
	}
}

// driveHelpers opens every chat-page driver script (inside its function,
// so nothing clashes with the page's names): note() writes a line into
// #drive-log, which the test reads in the dumped DOM; sleep() waits in
// real time (see drivenPage); until() waits for a condition, up to 60 s
// (a new chat's first turn on a loaded CI machine took over 30).
const driveHelpers = `const log = document.createElement("pre");
log.id = "drive-log";
document.body.append(log);
const note = (s) => { log.textContent += s + "\n"; };
const sleep = () => fetch("/ui/drive-sleep");
const until = async (what, f) => {
  for (let i = 0; i < 1200; i++) {
    const v = f();
    if (v) return v;
    await sleep();
  }
  throw new Error("gave up waiting for " + what);
};
const chatButton = (key) => document.querySelector('#chats li[data-chat="' + key + '"] button');
const messages = (role) => [...document.querySelectorAll("#messages > li.message" + (role ? "." + role : ""))];
const opened = (key, role) => until("chat " + key + " open", () => $("chat-title").textContent === key && !$("send-fields").disabled && messages(role).length > 0);
`

// drive runs body (JavaScript, after driveHelpers, inside an async
// function; it ends by noting "done") on the page in headless Chromium and
// returns the drive log and the final DOM.
func drive(t *testing.T, e *env, fragment, body string) (log, dom string) {
	t.Helper()
	chromium := chromiumPath(t)
	script := "\"use strict\";\n(async () => {\n" + driveHelpers + "  try {\n" + body + "\n  } catch (e) {\n    note(\"error: \" + e.message);\n  }\n})();\n"
	dom = dumpDOM(t, chromium, drivenPage(t, e, script)+"/#"+fragment, 30*time.Second)
	log = html.UnescapeString(regexp.MustCompile(`(?s)<pre id="drive-log">(.*?)</pre>`).FindStringSubmatch(dom + `<pre id="drive-log"></pre>`)[1])
	if !strings.Contains(log, "\ndone\n") {
		t.Fatalf("the page was not driven to the end:\n%s\n\nDOM:\n%s", log, dom)
	}
	t.Logf("drive log:\n%s", log)
	return log, dom
}

// logLine returns the text after "prefix: " on the drive log's line that
// starts with it.
func logLine(t *testing.T, log, prefix string) string {
	t.Helper()
	for _, l := range strings.Split(log, "\n") {
		if v, ok := strings.CutPrefix(l, prefix+": "); ok {
			return v
		}
	}
	t.Fatalf("the drive log has no %q line:\n%s", prefix, log)
	return ""
}

// proseReply is a model reply without code: Markdown, with markup that
// must stay text and a link that must not become one.
const proseReply = "Here is **bold**, *slanted* and `inline code`, for snake_case_names too.\n\n" +
	"## A heading\n\n- one\n- two\n\n1. first\n2. second\n\n" +
	"See [the docs](https://example.org/docs) but not [this](javascript:document.title='pwned-link').\n\n" +
	"<img src=x onerror=\"document.title='pwned-img'\"> and <script>document.title='pwned-script'</script>\n\n" +
	"```js\nconst x = \"<b>\";\n```" // a Python block would be run, not sent

// The chat page in a real browser: the chat list (most recent first,
// last messages), switching chats from it, a prose reply rendered as
// Markdown with its markup left inert, a turn's runs expanded (code,
// output, stop type), a failed turn saying why, and a message typed and
// sent with Enter whose turn shows as working until it is answered.
func TestUIChatPageInABrowser(t *testing.T) {
	chromiumPath(t)
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply {
		switch r.ChatKey() {
		case "ui-prose":
			return llmtest.Reply{Text: proseReply}
		case "ui-fail":
			return llmtest.Reply{Status: http.StatusBadRequest, Text: "the scripted model refuses this chat"}
		}
		if strings.Contains(r.Last(), "typed in the browser") {
			return llmtest.Code(`send_msg_text(_ck, "you typed it")`)
		}
		return llmtest.Code(`
def answer():
    return 6 * 7  # the answer
print("six times seven is", answer())
send_msg_text(_ck, "the answer is **42**")`)
	}, nil)
	for _, key := range []string{"ui-code", "ui-fail", "ui-prose"} { // ui-prose is the most recent
		e.post(key, "u1", "Alice", "hello "+key)
		e.waitTurns(key, 1)
	}

	log, dom := drive(t, e, "token="+testToken, `
    await until("the chat list", () => document.querySelectorAll("#chats li").length >= 3);
    note("list: " + [...document.querySelectorAll("#chats li")].map((li) => li.dataset.chat + " = " + li.querySelector(".chat-last").textContent).join(" | "));
    await opened("ui-prose", "assistant");
    note("opened first: " + $("chat-title").textContent);
    note("prose: " + messages("assistant")[0].querySelector(".body").innerHTML);

    chatButton("ui-code").click();
    await opened("ui-code", "assistant");
    note("current: " + document.querySelector('#chats button[aria-current="true"]').closest("li").dataset.chat);
    note("code chat: " + messages().map((li) => li.querySelector(".body").textContent).join(" | "));
    const turn = document.querySelector("#messages > li.turn");
    note("summary: " + turn.querySelector("summary").textContent);
    note("runs shown while closed: " + turn.querySelectorAll("section.run").length);
    turn.querySelector("summary").click();
    const run = await until("the run", () => turn.querySelector("section.run"));
    note("run head: " + run.querySelector(".run-head").textContent);
    note("run code: " + JSON.stringify(run.querySelector(".run-code").textContent));
    note("run output: " + JSON.stringify(run.querySelector(".run-output").textContent));
    note("highlighted: " + [...run.querySelectorAll(".run-code span")].map((s) => s.className + ":" + s.textContent).join(" "));
    note("calls: " + [...run.querySelectorAll("table.calls td code")].map((c) => c.textContent).join(","));

    let sawWorking = false;
    new MutationObserver(() => { if (!$("working").hidden) sawWorking = true; }).observe($("working"), { attributes: true });
    $("text").value = "typed in the browser\nwith a second line";
    $("text").dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", shiftKey: true, bubbles: true, cancelable: true }));
    for (let i = 0; i < 6; i++) await sleep();
    note("after shift+enter: " + messages("user").length + " user messages, text kept: " + ($("text").value !== ""));
    $("text").dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true, cancelable: true }));
    await until("the typed message", () => messages("user").some((li) => li.textContent.includes("typed in the browser")));
    note("textarea after enter: " + JSON.stringify($("text").value));
    await until("the answer", () => messages("assistant").some((li) => li.textContent.includes("you typed it")));
    await until("the turn's end", () => $("working").hidden && document.querySelectorAll("#messages > li.turn").length === 2);
    note("working seen: " + sawWorking);
    note("list first: " + document.querySelector("#chats li").dataset.chat + " = " + document.querySelector("#chats li .chat-last").textContent);

    chatButton("ui-fail").click();
    await opened("ui-fail", "user");
    const failed = await until("the failure", () => document.querySelector('#messages > li.turn[data-status="failed"] .turn-error:not([hidden])'));
    note("failed turn: " + failed.textContent);

    chatButton("ui-prose").click();
    await opened("ui-prose", "assistant");
    note("title: " + document.title);
    note("done");
`)
	mustContain(t, "chat list", logLine(t, log, "list"),
		"ui-prose = assistant: Here is **bold**")
	if l := logLine(t, log, "list"); !strings.HasPrefix(l, "ui-prose = ") || !strings.Contains(l, "| ui-fail = assistant: Sorry, I could not answer this time. Please try again later. | ui-code = assistant: the answer is **42**") {
		t.Errorf("the chat list is not most recent first with last messages: %s", l)
	}
	if got := logLine(t, log, "opened first"); got != "ui-prose" {
		t.Errorf("the page opened %s, not the most recent chat", got)
	}

	// The prose reply, rendered; its markup is text.
	prose := logLine(t, log, "prose")
	for _, want := range []string{
		"<strong>bold</strong>", "<em>slanted</em>", "<code>inline code</code>", "snake_case_names",
		"<h4>A heading</h4>", "<ul><li>one</li><li>two</li></ul>", "<ol><li>first</li><li>second</li></ol>",
		`<a href="https://example.org/docs" rel="noopener noreferrer" target="_blank">the docs</a>`,
		"[this](javascript:document.title='pwned-link')",
		`&lt;img src=x onerror="document.title='pwned-img'"&gt;`, "&lt;script&gt;document.title='pwned-script'&lt;/script&gt;",
		`<pre class="code"><code data-lang="js">const x = "&lt;b&gt;";</code></pre>`,
	} {
		mustContain(t, "the rendered prose reply", prose, want)
	}
	for _, bad := range []string{"<img", "<script", `href="javascript`} {
		if strings.Contains(prose, bad) {
			t.Errorf("the prose reply holds markup %q:\n%s", bad, prose)
		}
	}
	if got := logLine(t, log, "title"); got != "nekro" {
		t.Errorf("the page's title is %q: a reply's markup ran", got)
	}
	if n := strings.Count(dom, "<script"); n != 7 { // render.js, app.js, runlog.js, models.js, memories.js, knowledge.js, the driver
		t.Errorf("%d script elements in the page", n)
	}
	if strings.Contains(dom, `<img src="x"`) {
		t.Errorf("the reply's image became an element")
	}

	// Switching chats from the list; the turn's runs, expanded.
	if got := logLine(t, log, "current"); got != "ui-code" {
		t.Errorf("the list marks %s as the open chat", got)
	}
	mustContain(t, "ui-code's history", logLine(t, log, "code chat"), "hello ui-code | the answer is 42")
	mustContain(t, "the runs' summary", logLine(t, log, "summary"), "1 run · done")
	if got := logLine(t, log, "runs shown while closed"); got != "0" {
		t.Errorf("runs rendered before they were expanded: %s", got)
	}
	mustContain(t, "the run's head", logLine(t, log, "run head"), "Run 1 · NORMAL · exit 0 · ")
	mustContain(t, "the run's code", logLine(t, log, "run code"), `print(\"six times seven is\", answer())`)
	mustContain(t, "the run's output", logLine(t, log, "run output"), `six times seven is 42`)
	for _, want := range []string{"tok-keyword:def", "tok-def:answer", "tok-number:6", "tok-comment:# the answer", `tok-string:"six times seven is"`, "tok-call:send_msg_text"} {
		mustContain(t, "the highlighted code", logLine(t, log, "highlighted"), want)
	}
	mustContain(t, "the run's method calls", logLine(t, log, "calls"), "send_msg_text")

	// Enter sent the message (Shift+Enter did not); the turn showed as
	// working until its answer.
	mustContain(t, "after Shift+Enter", logLine(t, log, "after shift+enter"), "1 user messages, text kept: true")
	if got := logLine(t, log, "textarea after enter"); got != `""` {
		t.Errorf("the message box after sending: %s", got)
	}
	if got := logLine(t, log, "working seen"); got != "true" {
		t.Errorf("no working state was shown during the turn")
	}
	if got := logLine(t, log, "list first"); got != "ui-code = assistant: you typed it" {
		t.Errorf("the chat list after the answer starts with %q", got)
	}
	hist := texts(e.history("ui-code"))
	if len(hist) != 4 || hist[2] != "user: typed in the browser\nwith a second line" || hist[3] != "assistant: you typed it" {
		t.Errorf("ui-code's history after the browser sent:\n%s", strings.Join(hist, "\n"))
	}

	// A failed turn says why.
	mustContain(t, "the failed turn", logLine(t, log, "failed turn"), "This turn failed: ")
	mustContain(t, "the failed turn", logLine(t, log, "failed turn"), "the scripted model refuses this chat")
}

// A user's token in the browser: only the user's chats are listed,
// another user's chat shows the API's refusal (and the API refused it),
// the operator's pages are hidden, a new chat is claimed by its first
// message, and logging out forgets the token.
func TestUIUserTokenInABrowser(t *testing.T) {
	chromiumPath(t)
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply {
		return llmtest.Code(`send_msg_text(_ck, "hello in " + _ck)`)
	}, nil)
	token := func(id string) string {
		var u struct{ Token string }
		if st := e.call("POST", "/api/users", map[string]string{"user_id": id, "name": strings.ToUpper(id)}, &u); st != http.StatusCreated || u.Token == "" {
			t.Fatalf("POST /api/users %s: %d", id, st)
		}
		return u.Token
	}
	alice, bob := token("alice"), token("bob")
	for key, tok := range map[string]string{"alice-chat": alice, "bob-chat": bob} {
		if st := e.callToken(tok, "POST", "/api/chats/"+key+"/messages", map[string]string{"text": "mine: " + key}, nil); st != http.StatusAccepted {
			t.Fatalf("post in %s: %d", key, st)
		}
		e.waitTurns(key, 1)
	}

	log, _ := drive(t, e, "token="+alice+"&chat=bob-chat", `
    const refused = await until("the refusal", () => !$("chat-error").hidden && $("chat-error").textContent);
    note("refused: " + refused);
    note("send disabled: " + $("send-fields").disabled);
    await until("the chat list", () => document.querySelectorAll("#chats li").length > 0);
    note("listed: " + [...document.querySelectorAll("#chats li")].map((li) => li.dataset.chat).join(","));
    const shown = (el) => el.getClientRects().length > 0;
    note("plugins tab shown: " + shown(document.querySelector('#tabs a[data-view="plugins"]')) + ", playground shown: " + shown($("exec")));
    note("user field: " + $("user").value + " readonly=" + $("user").readOnly);

    chatButton("alice-chat").click();
    await opened("alice-chat", "assistant");
    note("alice-chat: " + messages().map((li) => li.querySelector(".body").textContent).join(" | "));

    const newChat = async (key, text) => {
      $("new-chat-key").value = key;
      $("new-chat").requestSubmit();
      await until("sending allowed in " + key, () => $("chat-title").textContent === key && !$("send-fields").disabled);
      $("text").value = text;
      $("send").requestSubmit();
    };
    await newChat("bob-chat", "let me in");
    note("post in bob-chat: " + await until("the refusal to post", () => $("send-error").textContent));
    note("text kept: " + $("text").value);

    await newChat("alice-new", "my own new chat");
    await opened("alice-new", "assistant");
    note("alice-new: " + messages().map((li) => li.querySelector(".body").textContent).join(" | "));
    note("listed after: " + [...document.querySelectorAll("#chats li")].map((li) => li.dataset.chat).sort().join(","));

    $("logout").click();
    note("after logout: token=" + JSON.stringify(localStorage.getItem("nekro.token")) + " field=" + JSON.stringify($("token").value) + " chats=" + document.querySelectorAll("#chats li").length + " messages=" + messages().length);
    note("done");
`)
	mustContain(t, "the refusal", logLine(t, log, "refused"), "Cannot open chat bob-chat: ")
	if got := logLine(t, log, "send disabled"); got != "true" {
		t.Errorf("sending stays enabled in a refused chat")
	}
	// The API refused it too.
	if st := e.callToken(alice, "GET", "/api/chats/bob-chat/messages", nil, nil); st != http.StatusNotFound && st != http.StatusForbidden {
		t.Errorf("alice reads bob-chat: %d", st)
	}
	if got := logLine(t, log, "listed"); got != "alice-chat" {
		t.Errorf("alice's chat list: %s", got)
	}
	if got := logLine(t, log, "plugins tab shown"); got != "false, playground shown: false" {
		t.Errorf("a user sees the operator's pages: plugins tab shown: %s", got)
	}
	if got := logLine(t, log, "user field"); got != "alice readonly=true" {
		t.Errorf("the user field: %s", got)
	}
	if got := logLine(t, log, "alice-chat"); got != "mine: alice-chat | hello in alice-chat" {
		t.Errorf("alice-chat in the page: %s", got)
	}
	if got := logLine(t, log, "post in bob-chat"); !strings.HasPrefix(got, "Not sent: ") {
		t.Errorf("posting in bob's chat: %s", got)
	}
	if got := logLine(t, log, "text kept"); got != "let me in" {
		t.Errorf("the refused message is not back in the box: %q", got)
	}
	for _, m := range e.history("bob-chat") {
		if strings.Contains(m.Text, "let me in") {
			t.Errorf("alice's message reached bob-chat: %+v", m)
		}
	}
	if got := logLine(t, log, "alice-new"); got != "my own new chat | hello in alice-new" {
		t.Errorf("alice's new chat: %s", got)
	}
	if h := e.history("alice-new"); len(h) == 0 || h[0].SenderID != "alice" {
		t.Errorf("alice-new's first message: %+v", h)
	}
	if got := logLine(t, log, "listed after"); got != "alice-chat,alice-new" {
		t.Errorf("alice's chat list after her new chat: %s", got)
	}
	if got := logLine(t, log, "after logout"); got != `token=null field="" chats=0 messages=0` {
		t.Errorf("after logging out: %s", got)
	}
}

// Files in the browser: one attached with the button, an image dropped on
// the conversation, sent as one multipart message; the assistant reads the
// file in its sandbox and answers with its content; the attachments show
// as download links (the image also as a thumbnail) and download with the
// token; a file over the server's limit is refused with the 413's reason.
func TestUIUploadsInABrowser(t *testing.T) {
	chromiumPath(t)
	attachment := regexp.MustCompile(`\[file attachment: (/app/uploads/[^\s(]+) \(`)
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply {
		m := attachment.FindStringSubmatch(r.Last())
		if m == nil {
			return llmtest.Code(`send_msg_text(_ck, "no file in the prompt")`)
		}
		return llmtest.Code(fmt.Sprintf(`send_msg_text(_ck, "the file says: " + open(%q).read().strip())`, m[1]))
	}, func(o *serveOptions) { o.UploadMaxFile = 64 << 10 })

	log, dom := drive(t, e, "token="+testToken+"&chat=ui-files", `
    await until("the chat", () => $("chat-title").textContent === "ui-files" && !$("send-fields").disabled);
    const files = (...fs) => { const dt = new DataTransfer(); fs.forEach((f) => dt.items.add(f)); return dt; };
    // The attach button opens the file input; choosing fills it.
    $("file").files = files(new File(["a secret note: 4711\n"], "note.txt", { type: "text/plain" })).files;
    $("file").dispatchEvent(new Event("change", { bubbles: true }));
    // A PNG dropped on the conversation.
    const png = Uint8Array.from(atob("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="), (c) => c.charCodeAt(0));
    const drop = files(new File([png], "dot.png", { type: "image/png" }));
    $("conversation").dispatchEvent(new DragEvent("dragenter", { dataTransfer: drop, bubbles: true, cancelable: true }));
    note("dragging: " + $("conversation").classList.contains("dropping"));
    $("conversation").dispatchEvent(new DragEvent("drop", { dataTransfer: drop, bubbles: true, cancelable: true }));
    note("pending: " + [...document.querySelectorAll("#pending li")].map((li) => li.textContent).join(" | "));
    $("text").value = "read my file";
    $("send").requestSubmit();
    const mine = await until("my message", () => messages("user").find((li) => li.querySelectorAll(".attachment").length === 2));
    note("pending after send: " + document.querySelectorAll("#pending li").length);
    note("attachments: " + [...mine.querySelectorAll(".attachment a.download")].map((a) => a.textContent).join(", "));
    await until("the thumbnail", () => mine.querySelector("img"));
    note("thumbnail: " + mine.querySelector("img").alt + " " + mine.querySelector("img").src.slice(0, 5));
    const reply = await until("the answer", () => messages("assistant").find((li) => li.textContent.includes("the file says")));
    note("reply: " + reply.querySelector(".body").textContent);

    // Downloading: the link fetches the file with the token and hands it to
    // the browser as a blob link; the driver catches that link and reads
    // its blob (the page's CSP keeps fetch off blob: URLs).
    const click = HTMLAnchorElement.prototype.click;
    const createURL = URL.createObjectURL;
    const blobs = new Map();
    URL.createObjectURL = (b) => { const u = createURL(b); blobs.set(u, b); return u; };
    let saved = null;
    HTMLAnchorElement.prototype.click = function () { saved = { href: this.href, name: this.download }; };
    mine.querySelector('.attachment[data-kind="file"] a.download').dispatchEvent(new MouseEvent("click", { bubbles: true, cancelable: true }));
    await until("the download", () => saved);
    HTMLAnchorElement.prototype.click = click;
    URL.createObjectURL = createURL;
    note("download: " + saved.name + " " + saved.href.slice(0, 5) + " " + JSON.stringify(await blobs.get(saved.href).text()));

    $("file").files = files(new File([new Uint8Array(70000)], "big.bin")).files;
    $("file").dispatchEvent(new Event("change", { bubbles: true }));
    $("text").value = "too big";
    $("send").requestSubmit();
    note("too big: " + await until("the refusal", () => $("send-error").textContent));
    note("kept: " + $("text").value + " / " + [...document.querySelectorAll("#pending li")].map((li) => li.textContent).join(" | "));
    note("done");
`)
	if got := logLine(t, log, "dragging"); got != "true" {
		t.Errorf("dragging files over the conversation does not show")
	}
	mustContain(t, "files to send", logLine(t, log, "pending"), "note.txt (20 bytes)")
	mustContain(t, "files to send", logLine(t, log, "pending"), "dot.png (")
	if got := logLine(t, log, "pending after send"); got != "0" {
		t.Errorf("%s files still pending after sending", got)
	}
	hist := e.history("ui-files")
	if len(hist) < 2 || hist[0].Text != "read my file" || len(hist[0].Attachments) != 2 {
		t.Fatalf("the history after the browser sent files:\n%s", strings.Join(texts(hist), "\n"))
	}
	kinds := map[string]string{}
	for _, a := range hist[0].Attachments {
		kinds[a.Kind] = a.Name
	}
	if kinds["file"] == "" || kinds["image"] == "" {
		t.Errorf("attachments %+v", hist[0].Attachments)
	}
	mustContain(t, "attachment links", logLine(t, log, "attachments"), "📎 "+kinds["file"])
	mustContain(t, "attachment links", logLine(t, log, "attachments"), "📎 "+kinds["image"])
	if got := logLine(t, log, "thumbnail"); got != kinds["image"]+" blob:" {
		t.Errorf("thumbnail: %s", got)
	}
	if got := logLine(t, log, "reply"); got != "the file says: a secret note: 4711" {
		t.Errorf("the assistant's answer: %s", got)
	}
	if got := logLine(t, log, "download"); got != kinds["file"]+` blob: "a secret note: 4711\n"` {
		t.Errorf("download: %s", got)
	}
	mustContain(t, "the 413", logLine(t, log, "too big"), "Too large, not sent: ")
	mustContain(t, "the 413", logLine(t, log, "too big"), "big.bin")
	mustContain(t, "after the 413", logLine(t, log, "kept"), "too big / 📎 big.bin")
	for _, m := range e.history("ui-files") {
		if m.Text == "too big" {
			t.Errorf("the refused message was stored: %+v", m)
		}
	}
	if strings.Contains(dom, `class="dropping"`) {
		t.Errorf("the conversation still shows a drop in progress")
	}
}

// A long history opens at its end and loads earlier pages as the user
// scrolls up, until its beginning, each message once and in order.
func TestUIHistoryPagesInABrowser(t *testing.T) {
	chromiumPath(t)
	e := startEnv(t, nil, nil)
	var res struct {
		StopType string `json:"stop_type"`
		Output   string `json:"output"`
	}
	for from := 0; from < 130; from += 50 { // a run sends 50 messages at most
		code := fmt.Sprintf(`for i in range(%d, %d): send_msg_text(_ck, f"line {i}")`, from, min(from+50, 130))
		if st := e.call("POST", "/api/chats/ui-long/exec", map[string]string{"code": code, "user_id": "u"}, &res); st != http.StatusOK || res.StopType != "NORMAL" {
			t.Fatalf("exec: %d %+v", st, res)
		}
	}
	log, _ := drive(t, e, "token="+testToken+"&chat=ui-long", `
    await opened("ui-long", "");
    const lines = () => messages().map((li) => li.querySelector(".body").textContent);
    note("first page: " + lines().length + " from " + lines()[0] + ", older: " + ($("load-older") !== null));
    for (let i = 0; i < 5 && $("load-older"); i++) {
      const n = lines().length;
      $("messages").scrollTop = 0;
      $("messages").dispatchEvent(new Event("scroll"));
      await until("an earlier page", () => lines().length > n);
      note("after scrolling up: " + lines().length + " from " + lines()[0]);
    }
    note("top: " + $("history-top").textContent);
    const all = lines();
    note("in order: " + all.every((l, i) => l === "line " + i) + " ids unique: " + (new Set(messages().map((li) => li.dataset.id)).size === all.length));
    note("done");
`)
	if got := logLine(t, log, "first page"); got != "50 from line 80, older: true" {
		t.Errorf("the first page: %s", got)
	}
	mustContain(t, "paging", log, "after scrolling up: 100 from line 30\n")
	mustContain(t, "paging", log, "after scrolling up: 130 from line 0\n")
	if got := logLine(t, log, "top"); got != "Beginning of the chat" {
		t.Errorf("the top of the history says %q", got)
	}
	if got := logLine(t, log, "in order"); got != "true ids unique: true" {
		t.Errorf("the history after paging: in order: %s", got)
	}
}

// The operator's side panel names the binary's version, as the status
// API gives it.
func TestUIShowsTheVersion(t *testing.T) {
	chromium := chromiumPath(t)
	e := startEnv(t, nil, func(o *serveOptions) {
		o.Build = server.Build{Version: "v9.8.7-test", Commit: "0123456789abcdef0123", BuildDate: "2026-11-25T00:00:00Z", Go: "go1.26 linux/amd64"}
	})
	var st struct {
		Build server.Build `json:"build"`
	}
	if code := e.call("GET", "/api/status", nil, &st); code != 200 || st.Build.Version != "v9.8.7-test" {
		t.Fatalf("status: %d %+v", code, st)
	}
	dom := dumpDOM(t, chromium, e.base+"/#token="+testToken+"&chat=versions", 5*time.Second)
	line := regexp.MustCompile(`<p id="build"[^>]*>[^<]*</p>`).FindString(dom)
	if !strings.Contains(line, "nekro v9.8.7-test · 0123456789ab · built 2026-11-25T00:00:00Z · go1.26 linux/amd64") {
		t.Errorf("the version line: %q", line)
	}
}
