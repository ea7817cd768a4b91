package pyplugin_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/testutil"
)

// routersDir holds the router test plugins: tester.webapp and
// tester.webother (a FastAPI APIRouter each, through mount_router).
const routersDir = "testdata/routers"

// needFastAPI skips when Debian's python3-fastapi is missing (make test
// installs it).
func needFastAPI(t *testing.T) {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import fastapi").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("fastapi is not installed for /usr/bin/python3 (make test installs python3-fastapi): %v", err)
		}
		t.Skip("fastapi is not installed for /usr/bin/python3 (make test installs python3-fastapi)")
	}
}

// get requests path of the server without its token and without
// following redirects: status, body and headers.
func get(t *testing.T, s *testutil.Served, method, path string, body []byte) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+s.Addr+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == nil {
		req.Body = nil
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		return 0, err.Error(), nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// rawGet sends path as it is written (no cleaning of dot segments or
// escapes by the client) and returns the status line and body.
func rawGet(t *testing.T, addr, path string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, addr)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	b, _ := io.ReadAll(c)
	return string(b)
}

// A Python plugin's FastAPI router, mounted as the reference mounts it,
// is served at /plugins/{key}/ through the real binary: without the API
// token (as the reference's routers), the request's path, query, headers
// and body in, status, headers and body out, a streamed answer streamed;
// bodies over 1 MiB refused; path tricks stay in the plugin's own
// router; a handler that raises is a bare 500 (the traceback only in the
// log), one that hangs a 504 that leaves the plugin, the server and other
// plugins serving, one that blocks its event loop a 504 and a restarted
// process, one that kills its process a 502 and a restarted process;
// many requests at once; 404 while disabled; a reload swaps the router.
func TestPythonPluginRouters(t *testing.T) {
	needFastAPI(t)
	data, plugins := testutil.DataDir(t), t.TempDir()
	for _, name := range []string{"webapp.py", "webother.py"} {
		b, err := os.ReadFile(filepath.Join(routersDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(plugins, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := testutil.Serve(t, data, "tok", "NEKRO_PLUGIN_DIR="+plugins)
	const app = "/plugins/tester.webapp"

	// The page and the request as the handler sees it; no token needed,
	// and the token sent is not passed on to the plugin.
	if st, body, h := get(t, s, "GET", app+"/", nil); st != 200 || body != "<h1>webapp v1</h1>" || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Fatalf("page: %d %q %v\n%s", st, body, h, s.Logs)
	}
	req, _ := http.NewRequest("GET", "http://"+s.Addr+app+"/echo?q=a%20b", nil)
	req.Header.Set("X-Test", "yes")
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	echo, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `{"method":"GET","path":"/plugins/tester.webapp/echo","q":"a b","x_test":"yes","auth":""}`; string(echo) != want {
		t.Errorf("echo: %s, want %s", echo, want)
	}
	if st, body, _ := get(t, s, "GET", app+"/file", nil); st != 200 || body != strings.Repeat("file ", 40000) {
		t.Errorf("FileResponse: %d, %d bytes", st, len(body))
	}
	if st, _, h := get(t, s, "GET", app+"/cookies", nil); st != 200 || len(h.Values("Set-Cookie")) != 2 {
		t.Errorf("two cookies: %d %v", st, h)
	}
	if st, body, _ := get(t, s, "GET", app+"/missing", nil); st != 404 || !strings.Contains(body, "no such thing") {
		t.Errorf("HTTPException: %d %q", st, body)
	}
	if st, _, _ := get(t, s, "GET", "/plugins/tester.nothing/", nil); st != 404 {
		t.Errorf("unknown plugin: %d", st)
	}

	// Bodies: 1 MiB in and 3 MiB out intact, one byte more refused.
	in := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	sum := sha256.Sum256(in)
	if st, body, _ := get(t, s, "POST", app+"/echo", in); st != 200 || !strings.Contains(body, hex.EncodeToString(sum[:])) {
		t.Errorf("1 MiB body: %d %q", st, body)
	}
	if st, body, _ := get(t, s, "POST", app+"/echo", append(in, 'x')); st != 413 {
		t.Errorf("1 MiB + 1 body: want 413, got %d %q", st, body)
	}
	if st, body, h := get(t, s, "GET", app+"/big", nil); st != 200 || len(body) != 3<<20 {
		t.Errorf("3 MiB answer: %d, %d bytes", st, len(body))
	} else if got := sha256.Sum256([]byte(body)); hex.EncodeToString(got[:]) != h.Get("X-Sum") {
		t.Errorf("3 MiB answer: corrupted")
	}

	// Path tricks never reach the other plugin's router through this
	// one: dot segments are redirected by the server (to the other
	// plugin's own URL, which a client then asks as itself), escaped
	// ones reach only this plugin's router, which has no such route.
	if st, body, _ := get(t, s, "GET", "/plugins/tester.webother/secret", nil); st != 200 || !strings.Contains(body, "other-secret") {
		t.Fatalf("the other plugin: %d %q", st, body)
	}
	for _, p := range []string{
		app + "/../tester.webother/secret",
		app + "/..%2Ftester.webother/secret",
		app + "/%2E%2E/tester.webother/secret",
		app + "/%2e%2e%2f%2e%2e%2ftester.webother%2fsecret",
		app + "%2F..%2Ftester.webother/secret",
		app + "/..%2f..%2fplugins%2ftester.webother%2fsecret",
		app + "/.%2e/tester.webother/secret",
		app + "/%252e%252e/tester.webother/secret",
	} {
		got := rawGet(t, s.Addr, p)
		status, _, _ := strings.Cut(got, "\r\n")
		if strings.Contains(got, "other-secret") || strings.Contains(status, " 200 ") {
			t.Errorf("%s reached another router: %q", p, got)
		}
	}

	// A handler that hangs, and one that blocks its process's event loop
	// (in the other plugin), while the rest goes on.
	type result struct {
		status int
		body   string
		took   time.Duration
	}
	hang, block, slow := make(chan result, 1), make(chan result, 1), make(chan string, 1)
	go func() { // a body that never comes
		c, err := net.Dial("tcp", s.Addr)
		if err != nil {
			slow <- err.Error()
			return
		}
		defer c.Close()
		fmt.Fprintf(c, "POST %s/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc", app)
		c.SetReadDeadline(time.Now().Add(90 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		slow <- line
	}()
	go func() {
		t0 := time.Now()
		st, body, _ := get(t, s, "GET", app+"/hang", nil)
		hang <- result{st, body, time.Since(t0)}
	}()
	go func() {
		t0 := time.Now()
		st, body, _ := get(t, s, "GET", "/plugins/tester.webother/block", nil)
		block <- result{st, body, time.Since(t0)}
	}()

	// A streamed answer streams: the first event arrives while the
	// handler waits for /release.
	resp, err = http.Get("http://" + s.Addr + app + "/events")
	if err != nil {
		t.Fatal(err)
	}
	events := bufio.NewReader(resp.Body)
	first := make(chan string, 1)
	go func() {
		line, _ := events.ReadString('\n')
		first <- line
	}()
	select {
	case line := <-first:
		if line != "data: first\n" {
			t.Errorf("first event: %q", line)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the first event did not arrive before the stream ended: the answer is buffered")
	}
	if st, _, _ := get(t, s, "POST", app+"/release", nil); st != 200 {
		t.Errorf("release: %d", st)
	}
	rest, _ := io.ReadAll(events)
	resp.Body.Close()
	if string(rest) != "\ndata: second\n\n" {
		t.Errorf("the rest of the stream: %q", rest)
	}

	// Many requests at once, and more bodies at once than are taken in
	// at a time.
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	t0 := time.Now()
	for i := 0; i < 100; i++ {
		wg.Go(func() {
			st, _, _ := get(t, s, "GET", app+"/slow?ms=300", nil)
			mu.Lock()
			statuses[st]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if statuses[200] != 100 {
		t.Errorf("100 concurrent requests: %v", statuses)
	}
	t.Logf("100 concurrent requests of 300 ms each: %s", time.Since(t0))
	half := in[:512<<10]
	halfSum := sha256.Sum256(half)
	bad := 0
	t0 = time.Now()
	for i := 0; i < 80; i++ {
		wg.Go(func() {
			st, body, _ := get(t, s, "POST", app+"/echo", half)
			if st != 200 || !strings.Contains(body, hex.EncodeToString(halfSum[:])) {
				mu.Lock()
				bad++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if bad > 0 {
		t.Errorf("80 concurrent 512 KiB bodies: %d failed", bad)
	}
	t.Logf("80 concurrent 512 KiB bodies: %s", time.Since(t0))

	// A handler that raises: a bare 500, the traceback in nekro's log.
	if st, body, _ := get(t, s, "GET", app+"/boom", nil); st != 500 || strings.Contains(body, "route-secret-detail") || strings.Contains(body, "Traceback") {
		t.Errorf("raising handler: %d %q", st, body)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		// The 500 is sent before the exception reaches the log.
		if logs := s.Logs.String(); strings.Contains(logs, "route-secret-detail") && strings.Contains(logs, "Traceback") {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the raising handler's traceback is not in the log:\n%s", s.Logs)
			break
		}
	}
	// The plugin's own calls to nekro work from a handler.
	if st, body, _ := get(t, s, "GET", app+"/store?v=kept", nil); st != 200 || !strings.Contains(body, `"kept"`) {
		t.Errorf("store from a route: %d %q", st, body)
	}

	// The body that never came: 408 once its time is up.
	if line := <-slow; !strings.Contains(line, " 408 ") {
		t.Errorf("a body that never comes: %q", line)
	}
	// The hang: 504 after the start timeout, the plugin still serving.
	r := <-hang
	if r.status != 504 || r.took < 29*time.Second {
		t.Errorf("hanging handler: %d after %s: %q", r.status, r.took, r.body)
	}
	if st, body, _ := get(t, s, "GET", app+"/version", nil); st != 200 || !strings.Contains(body, "v1") {
		t.Errorf("after the hang: %d %q", st, body)
	}
	// The blocked event loop: 504, then the process is restarted and
	// the other plugin serves again.
	r = <-block
	if r.status != 504 {
		t.Errorf("blocking handler: %d after %s: %q", r.status, r.took, r.body)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, body, _ := get(t, s, "GET", "/plugins/tester.webother/secret", nil)
		if st == 200 && strings.Contains(body, "other-secret") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the blocked plugin never served again: %d %q\n%s", st, body, s.Logs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(s.Logs.String(), "event loop is blocked") {
		t.Errorf("the blocked plugin's restart is not logged")
	}

	// The process dies mid-request: 502, and it is restarted.
	if st, body, _ := get(t, s, "GET", app+"/die", nil); st != 502 || !strings.Contains(body, "restarted") {
		t.Errorf("dying handler: %d %q", st, body)
	}
	if st, body, _ := get(t, s, "GET", app+"/version", nil); st != 200 || !strings.Contains(body, "v1") {
		t.Errorf("after the process died: %d %q", st, body)
	}

	// The process dies in the middle of a stream: the answer is cut
	// short (no clean end), and the process restarts.
	resp, err = http.Get("http://" + s.Addr + app + "/stream-die")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || !strings.HasPrefix(string(got), "data: before") || strings.Contains(string(got), "never") {
		t.Errorf("a stream whose process dies: %q, err %v (want the first event and an unexpected end)", got, err)
	}
	if st, body, _ := get(t, s, "GET", app+"/version", nil); st != 200 {
		t.Errorf("after the process died in a stream: %d %q", st, body)
	}

	// Disabled: 404; enabled again: served.
	if st, body := s.API("POST", "/api/plugins/tester.webapp/disable", nil); st != 200 {
		t.Fatalf("disable: %d %s", st, body)
	}
	if st, _, _ := get(t, s, "GET", app+"/version", nil); st != 404 {
		t.Errorf("disabled: want 404, got %d", st)
	}
	if st, body := s.API("POST", "/api/plugins/tester.webapp/enable", nil); st != 200 {
		t.Fatalf("enable: %d %s", st, body)
	}
	if st, _, _ := get(t, s, "GET", app+"/version", nil); st != 200 {
		t.Errorf("enabled again: %d", st)
	}

	// A reload swaps the router; a stream open on the old version ends
	// (an EventSource would reconnect, to the new one).
	old, err := http.Get("http://" + s.Addr + app + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer old.Body.Close()
	oldEvents := bufio.NewReader(old.Body)
	if line, _ := oldEvents.ReadString('\n'); line != "data: first\n" {
		t.Fatalf("the stream before the reload: %q", line)
	}
	oldEnded := make(chan time.Time, 1)
	go func() {
		io.ReadAll(oldEvents)
		oldEnded <- time.Now()
	}()
	b, _ := os.ReadFile(filepath.Join(plugins, "webapp.py"))
	if err := os.WriteFile(filepath.Join(plugins, "webapp.py"), bytes.Replace(b, []byte(`VERSION = "v1"`), []byte(`VERSION = "v2"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, body := s.API("POST", "/api/plugins/tester.webapp/reload", nil); st != 200 {
		t.Fatalf("reload: %d %s", st, body)
	}
	if st, body, _ := get(t, s, "GET", app+"/version", nil); st != 200 || !strings.Contains(body, "v2") {
		t.Errorf("after the reload: %d %q", st, body)
	}
	select {
	case <-oldEnded:
	case <-time.After(20 * time.Second):
		t.Errorf("the stream open on the old version did not end after the reload")
	}

	// An open stream does not hold nekro's shutdown: it ends first.
	resp, err = http.Get("http://" + s.Addr + app + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if line, _ := bufio.NewReader(resp.Body).ReadString('\n'); line != "data: first\n" {
		t.Fatalf("the stream before the shutdown: %q", line)
	}
	t0 = time.Now()
	s.Stop()
	if took := time.Since(t0); took > 15*time.Second {
		t.Errorf("shutdown with an open stream took %s", took)
	}
}

// A plugin that mounts a router where FastAPI is not installed does not
// load, its error naming the package; the others load.
func TestRouterWithoutFastAPIFailsToLoad(t *testing.T) {
	r := testutil.RunNekro(t, nil, "plugins", "--data", testutil.DataDir(t), "--plugin-dir", "testdata/nofastapi")
	if r.Code == 0 || !strings.Contains(r.Stdout, "tester.fine") {
		t.Fatalf("nekro plugins: want exit 1 listing tester.fine: %+v", r)
	}
	i := strings.Index(r.Stdout, "not loaded (1):")
	if i < 0 {
		t.Fatalf("no list of plugins not loaded:\n%s", r.Stdout)
	}
	for _, w := range []string{"nofastapi.py", "RouterError", "mount_router", "fastapi package", "python3-fastapi"} {
		if !strings.Contains(r.Stdout[i:], w) {
			t.Errorf("the failure lacks %q:\n%s", w, r.Stdout[i:])
		}
	}
}

// Web requests that end the plugin's process again and again are refused
// for a while (503), as a chat's calls are: an anonymous caller cannot
// keep the process restarting, and the chats' sandbox calls keep being
// answered meanwhile.
func TestRoutesThatEndTheProcessAreRefused(t *testing.T) {
	needFastAPI(t)
	data, plugins := testutil.DataDir(t), t.TempDir()
	b, err := os.ReadFile(filepath.Join(routersDir, "webapp.py"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plugins, "webapp.py"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	s := testutil.Serve(t, data, "tok", "NEKRO_PLUGIN_DIR="+plugins)
	const app = "/plugins/tester.webapp"
	if st, body, _ := get(t, s, "GET", app+"/version", nil); st != 200 {
		t.Fatalf("version: %d %q\n%s", st, body, s.Logs)
	}
	for i := 1; i <= 3; i++ { // two deaths are forgiven, the third is not
		if st, body, _ := get(t, s, "GET", app+"/die", nil); st != 502 {
			t.Fatalf("death %d: %d %q", i, st, body)
		}
	}
	st, body, _ := get(t, s, "GET", app+"/version", nil)
	if st != 503 || !strings.Contains(body, "refuses web requests") {
		t.Fatalf("after three deaths: %d %q, want 503 refusing web requests", st, body)
	}
	// The chats' calls are answered meanwhile.
	if st, out := s.API("POST", "/api/chats/c1/exec", map[string]string{"code": "print(webapp_version())"}); st != 200 || !strings.Contains(out, "v1") {
		t.Fatalf("a sandbox call while web requests are refused: %d %s", st, out)
	}
	if !strings.Contains(s.Logs.String(), "(web routes)") {
		t.Errorf("the refusal is not logged with its caller:\n%s", s.Logs)
	}
	// And web requests are served again once the refusal (5 s) is over.
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, body, _ := get(t, s, "GET", app+"/version", nil)
		if st == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("web requests still refused after 60 s: %d %q", st, body)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
