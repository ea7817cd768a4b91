package mcp_test

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/nekro-go/nekro/internal/testutil"
)

// conformanceScenarios are the official conformance suite's server
// scenarios (@modelcontextprotocol/conformance, the version of
// testdata/npm/package-lock.json: the newest that runs on Debian's
// Node 20) that apply to a server of arbitrary tools, as nekro's is.
//
// Out of scope, because they call tools, prompts or resources that only
// the suite's own reference server has (test_simple_text, test_image_content,
// test_tool_with_logging, test_sampling, test_elicitation, ...,
// test://static-text, test_simple_prompt, ...) or features nekro does not
// offer: tools-call-*, json-schema-2020-12, elicitation-*,
// server-sse-polling, completion-complete, resources-read-*,
// resources-templates-read, resources-(un)subscribe, prompts-get-*.
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

// The conformance suite against /mcp on the real nekro serve. The suite
// cannot send a bearer token, so a proxy in the test adds the operator's
// token and ?chat= to each request, as a configured MCP client would
// (the Host header passes through unchanged, for the DNS rebinding
// checks). A scenario fails the test when the suite reports a failure.
func TestConformanceSuiteAgainstServe(t *testing.T) {
	suite := filepath.Join(npmDir(t), "@modelcontextprotocol", "conformance", "dist", "index.js")
	srv := testutil.Serve(t, testutil.DataDir(t), "conf-token")
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
	hs := &http.Server{Handler: proxy}
	go hs.Serve(ln)
	defer hs.Close()

	results := regexp.MustCompile(`Passed: (\d+)/(\d+), (\d+) failed`)
	for _, sc := range conformanceScenarios {
		t.Run(sc, func(t *testing.T) {
			cmd := exec.Command("node", suite, "server", "--url", "http://"+ln.Addr().String()+"/mcp", "--scenario", sc,
				"--output-dir", t.TempDir())
			cmd.Dir = t.TempDir()
			out, err := cmd.CombinedOutput()
			m := results.FindSubmatch(out)
			if err != nil || m == nil || string(m[3]) != "0" || string(m[1]) != string(m[2]) || string(m[1]) == "0" {
				t.Errorf("conformance scenario %s failed (%v):\n%s", sc, err, out)
			}
		})
	}
}
