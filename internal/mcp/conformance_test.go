package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nekro-go/nekro/internal/testutil"
)

// The official MCP conformance suite (@modelcontextprotocol/conformance,
// the version of testdata/npm/package-lock.json: the newest that runs on
// Debian's Node 20) has 32 server scenarios. nekro passes 12 of them, and
// 3 of the 4 checks of json-schema-2020-12 (knownGaps); the other 19 are
// out of scope, each for the reason given in outOfScope.

// conformanceScenarios are the scenarios that apply to a server of
// arbitrary tools, run against the production binary (the built-in
// plugins only).
var conformanceScenarios = []string{
	"server-initialize",
	"ping",
	"tools-list",
	"logging-set-level",
	"server-sse-multiple-streams",
	"dns-rebinding-protection",
	"resources-list",
	"prompts-list",
}

// fixtureScenarios call the suite's fixture tools. They run against a
// nekro whose plugin nekro_test.mcp_conformance (testdata/conformance/
// fixture, built into that test binary only) has methods of those names
// written with the public plugin SDK, so each proves how nekro maps a
// plugin's results to MCP.
var fixtureScenarios = []string{
	"tools-list",               // again, with the fixture tools listed
	"tools-call-simple-text",   // a TOOL's string result: text content
	"tools-call-image",         // a MULTIMODAL_AGENT data: URL image: image content
	"tools-call-error",         // a method's error: isError with the message
	"tools-call-with-progress", // ctx.Progress: notifications/progress
	"json-schema-2020-12",      // the input schema's $schema and additionalProperties (not $defs, see knownGaps)
}

// knownGaps are checks of in-scope scenarios that fail by design. The
// test fails if one passes, so the list stays true.
var knownGaps = map[string]string{
	// nekro makes a tool's input schema from its parameters' Python type
	// hints; a nested object is a dict, with no $defs of its fields.
	"json-schema-2020-12-$defs": "json-schema-2020-12",
}

// outOfScope are the suite's other server scenarios and why nekro's
// server cannot pass them.
var outOfScope = map[string]string{
	"tools-call-audio":              "a MULTIMODAL_AGENT part is text or an image (plugin.ContentPart); a plugin cannot return audio",
	"tools-call-embedded-resource":  "a plugin cannot return an embedded resource (a MULTIMODAL_AGENT part is text or an image)",
	"tools-call-mixed-content":      "needs an embedded resource next to text and an image (see tools-call-embedded-resource)",
	"tools-call-with-logging":       "a method's ctx.Logger() writes nekro's log; nekro sends no log messages to the client",
	"tools-call-sampling":           "ctx.AskModel asks the operator's models, never the client's (no sampling)",
	"tools-call-elicitation":        "the plugin SDK has no way to ask the client's user (no elicitation)",
	"elicitation-sep1034-defaults":  "no elicitation (see tools-call-elicitation)",
	"elicitation-sep1330-enums":     "no elicitation (see tools-call-elicitation)",
	"server-sse-polling":            "needs a tool that closes its SSE stream mid-call and resumable streams; nekro's calls answer on their own stream",
	"completion-complete":           "nekro serves no prompts or resource templates to complete",
	"resources-read-text":           "nekro serves no resources (its tools are plugin methods)",
	"resources-read-binary":         "nekro serves no resources",
	"resources-templates-read":      "nekro serves no resource templates",
	"resources-subscribe":           "nekro serves no resources to subscribe to",
	"resources-unsubscribe":         "nekro serves no resources to subscribe to",
	"prompts-get-simple":            "nekro serves no prompts",
	"prompts-get-with-args":         "nekro serves no prompts",
	"prompts-get-embedded-resource": "nekro serves no prompts",
	"prompts-get-with-image":        "nekro serves no prompts",
}

// The conformance suite against /mcp on the real nekro serve. The suite
// cannot send a bearer token, so a proxy in the test adds the operator's
// token and ?chat= to each request, as a configured MCP client would
// (the Host header passes through unchanged, for the DNS rebinding
// checks). A scenario fails the test when one of its checks fails.
func TestConformanceSuiteAgainstServe(t *testing.T) {
	runSuite(t, testutil.Nekro(t), conformanceScenarios)
}

// The suite's tool scenarios against the binary with the fixture plugin.
func TestConformanceSuiteFixtureTools(t *testing.T) {
	runSuite(t, testutil.Binary(t, "./internal/mcp/testdata/conformance"), fixtureScenarios)
}

// The suite's scenario list is the one the scopes above account for:
// a newer suite's new scenario must be run or put out of scope.
func TestConformanceScenariosAccountedFor(t *testing.T) {
	suite := filepath.Join(npmDir(t), "@modelcontextprotocol", "conformance", "dist", "index.js")
	out, err := exec.Command("node", suite, "list", "--server").CombinedOutput()
	if err != nil {
		t.Fatalf("conformance list: %v\n%s", err, out)
	}
	listed := map[string]bool{}
	for _, sc := range append(append([]string(nil), conformanceScenarios...), fixtureScenarios...) {
		listed[sc] = true
	}
	for sc := range outOfScope {
		if listed[sc] {
			t.Errorf("%s is run and out of scope", sc)
		}
		listed[sc] = true
	}
	n := 0
	for _, sc := range serverScenarios.FindAllSubmatch(out, -1) {
		n++
		if !listed[string(sc[1])] {
			t.Errorf("the suite's server scenario %s is neither run nor out of scope", sc[1])
		}
		delete(listed, string(sc[1]))
	}
	for sc := range listed {
		t.Errorf("%s is not a server scenario of the suite", sc)
	}
	if n == 0 {
		t.Fatalf("no server scenarios listed:\n%s", out)
	}
}

// serverScenarios are the lines of `conformance list --server`.
var serverScenarios = regexp.MustCompile(`(?m)^\s+- (\S+)$`)

// check is one check of a scenario, as the suite saves it (checks.json).
type check struct {
	ID, Status, ErrorMessage string
}

func runSuite(t *testing.T, bin string, scenarios []string) {
	suite := filepath.Join(npmDir(t), "@modelcontextprotocol", "conformance", "dist", "index.js")
	srv := testutil.ServeBinary(t, bin, testutil.DataDir(t), "conf-token")
	target, _ := url.Parse("http://" + srv.Addr)
	proxy := httputil.NewSingleHostReverseProxy(target)
	direct := proxy.Director
	proxy.Director = func(r *http.Request) {
		host := r.Host
		direct(r)
		r.Host = host
		r.Header.Set("Authorization", "Bearer conf-token")
		q := r.URL.Query()
		q.Set("chat", "conformance")
		r.URL.RawQuery = q.Encode()
	}
	proxy.FlushInterval = -1 // server-sent events go through as they come
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var trace proxyTrace
	hs := &http.Server{Handler: trace.wrap(proxy)}
	go hs.Serve(ln)
	defer hs.Close()

	for _, sc := range scenarios {
		t.Run(sc, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command("node", suite, "server", "--url", "http://"+ln.Addr().String()+"/mcp", "--scenario", sc,
				"--output-dir", dir)
			cmd.Dir = t.TempDir()
			out, _ := cmd.CombinedOutput() // it exits 1 on a failed check, known gaps included
			files, _ := filepath.Glob(filepath.Join(dir, "*", "checks.json"))
			if len(files) != 1 {
				t.Fatalf("conformance scenario %s saved no checks:\n%s", sc, out)
			}
			b, _ := os.ReadFile(files[0])
			var checks []check
			if err := json.Unmarshal(b, &checks); err != nil {
				t.Fatalf("%s: %v", files[0], err)
			}
			passed := 0
			for _, c := range checks {
				gap := knownGaps[c.ID] == sc
				switch {
				case c.Status == "SUCCESS" && gap:
					t.Errorf("%s: check %s passes now: remove it from knownGaps", sc, c.ID)
				case c.Status == "SUCCESS":
					passed++
				case c.Status == "INFO", gap && c.Status == "FAILURE":
				default:
					t.Errorf("%s: check %s: %s %s", sc, c.ID, c.Status, c.ErrorMessage)
				}
			}
			if passed == 0 {
				t.Errorf("conformance scenario %s passed no check:\n%s", sc, out)
			}
			if t.Failed() {
				t.Logf("the suite's output:\n%s", out)
				t.Logf("the requests through the proxy:\n%s", trace.String())
				t.Logf("nekro serve's log:\n%s", srv.Logs.String())
			}
		})
	}
}

// proxyTrace records each request through the suite's proxy: when it
// started, its method, JSON-RPC method and session, and when and how
// its answer ended, for a failed scenario's log.
type proxyTrace struct {
	mu    sync.Mutex
	lines []string
	start time.Time
}

func (p *proxyTrace) wrap(h http.Handler) http.Handler {
	p.start = time.Now()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct{ Method string }
		json.Unmarshal(body, &msg)
		began := time.Since(p.start)
		what := fmt.Sprintf("%-6s %-28s session=%.12s", r.Method, msg.Method, r.Header.Get("Mcp-Session-Id"))
		p.add(fmt.Sprintf("%8.3fs %s", began.Seconds(), what))
		rec := &statusRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		p.add(fmt.Sprintf("%8.3fs %s -> %d (began %.3fs)", time.Since(p.start).Seconds(), what, rec.status, began.Seconds()))
	})
}

func (p *proxyTrace) add(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines = append(p.lines, line)
}

func (p *proxyTrace) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// statusRecorder keeps the status a handler wrote; it passes flushes on.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// The fixture plugin through `nekro mcp` (stdio), for what the suite does
// not look at: the image's bytes, the progress reports' values and
// messages, no reports for a client that asked for none, and the input
// schema's additionalProperties: false holding (an unknown argument is
// a TypeError).
func TestFixtureToolsOverStdio(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.Command(testutil.Binary(t, "./internal/mcp/testdata/conformance"), "mcp", "--data", testutil.DataDir(t), "--chat", "c1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	var mu sync.Mutex
	var reports []*mcp.ProgressNotificationParams
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			reports = append(reports, req.Params)
		}})
	sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to nekro mcp: %v\n%s", err, stderr.String())
	}
	defer sess.Close()

	res, _ := call(t, sess, "test_image_content", nil)
	if len(res.Content) != 1 {
		t.Fatalf("test_image_content: %d parts", len(res.Content))
	}
	img, ok := res.Content[0].(*mcp.ImageContent)
	if !ok || img.MIMEType != "image/png" {
		t.Fatalf("test_image_content: %#v", res.Content[0])
	}
	if pic, err := png.Decode(bytes.NewReader(img.Data)); err != nil || pic.Bounds().Dx() != 1 {
		t.Errorf("test_image_content's data is not the 1x1 PNG: %v", err)
	} else if r, g, b, _ := pic.At(0, 0).RGBA(); r != 0xffff || g != 0 || b != 0 {
		t.Errorf("test_image_content's pixel: %d %d %d, want red", r, g, b)
	}

	p := &mcp.CallToolParams{Name: "test_tool_with_progress"}
	p.SetProgressToken("tok-1")
	if res, err := sess.CallTool(ctx, p); err != nil || res.IsError {
		t.Fatalf("test_tool_with_progress: %v %+v", err, res)
	}
	if res, text := call(t, sess, "test_tool_with_progress", nil); res.IsError || text != "Progress complete" {
		t.Fatalf("test_tool_with_progress without a token: %q", text)
	}
	var got []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		got = got[:0]
		for _, r := range reports {
			got = append(got, fmt.Sprintf("%v %g/%g %s", r.ProgressToken, r.Progress, r.Total, r.Message))
		}
		mu.Unlock()
		if len(got) >= 3 || time.Now().After(deadline) {
			break
		}
	}
	if want := "tok-1 0/100 step 1 of 3|tok-1 50/100 step 2 of 3|tok-1 100/100 step 3 of 3"; strings.Join(got, "|") != want {
		t.Errorf("progress reports:\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}

	res, text := call(t, sess, "json_schema_2020_12_tool", map[string]any{"name": "n", "zip": "10115"})
	if !res.IsError || !strings.HasPrefix(text, "TypeError: json_schema_2020_12_tool(): got an unexpected argument 'zip'") {
		t.Errorf("an argument the schema does not allow: isError=%v %q", res.IsError, text)
	}
	res, text = call(t, sess, "json_schema_2020_12_tool", map[string]any{"name": "n", "address": map[string]any{"city": "Berlin"}})
	if res.IsError || !strings.Contains(text, `"city":"Berlin"`) {
		t.Errorf("json_schema_2020_12_tool: isError=%v %q", res.IsError, text)
	}
}
