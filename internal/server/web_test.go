package server_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/plugin"
)

// hookRecorder records the webhook calls a test plugin's handler got.
type hookRecorder struct {
	mu     sync.Mutex
	bodies []string
	auth   []string // the Authorization header each call saw
}

func (h *hookRecorder) calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.bodies...)
}

func sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// rawCall posts body to path with the headers given, returning the
// status and the answer.
func (e *env) rawCall(method, path string, body []byte, header map[string]string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.base+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// Webhooks: a call is authenticated by a signature under the handler's
// secret or by the API token, or reaches no handler; bodies are capped;
// a failing handler does not stop the next; a disabled plugin's handler
// is not called.
func TestWebhookAuthentication(t *testing.T) {
	var rec hookRecorder
	var secretMu sync.Mutex
	secret := "s3cret"
	failing := plugin.New(plugin.Meta{ModuleName: "hooks_a", Author: "nekro_test", Version: "0"})
	failing.MountWebhook("test_hook", func() string { secretMu.Lock(); defer secretMu.Unlock(); return secret },
		func(ctx context.Context, body []byte, h http.Header) error { return errors.New("handler a broke") })
	good := plugin.New(plugin.Meta{ModuleName: "hooks_b", Author: "nekro_test", Version: "0"})
	good.MountWebhook("test_hook", func() string { secretMu.Lock(); defer secretMu.Unlock(); return secret },
		func(ctx context.Context, body []byte, h http.Header) error {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.bodies = append(rec.bodies, string(body))
			rec.auth = append(rec.auth, h.Get("Authorization"))
			return nil
		})
	tokenOnly := plugin.New(plugin.Meta{ModuleName: "hooks_c", Author: "nekro_test", Version: "0"})
	tokenOnly.MountWebhook("token_only", nil, func(ctx context.Context, body []byte, h http.Header) error {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.bodies = append(rec.bodies, "token_only:"+string(body))
		return nil
	})
	e := startEnv(t, nil, func(o *serveOptions) {
		o.App.Host.Plugins = append(pluginhost.Registered(), failing, good, tokenOnly)
	})
	body := []byte(`{"n":1}`)
	const path = "/api/webhook/test_hook"

	for name, h := range map[string]map[string]string{
		"unsigned":         nil,
		"wrong secret":     {"X-Hub-Signature-256": sign("other", body)},
		"malformed":        {"X-Hub-Signature-256": "sha256=zz"},
		"bare hex":         {"X-Hub-Signature-256": strings.TrimPrefix(sign("s3cret", body), "sha256=")},
		"other body":       {"X-Hub-Signature-256": sign("s3cret", []byte(`{"n":2}`))},
		"wrong token":      {"Authorization": "Bearer nope"},
		"token, no bearer": {"Authorization": testToken},
	} {
		if st, out := e.rawCall("POST", path, body, h); st != http.StatusUnauthorized {
			t.Errorf("%s: %d %s, want 401", name, st, out)
		}
	}
	if st, out := e.rawCall("POST", "/api/webhook/token_only", body, map[string]string{"X-Hub-Signature-256": sign("", body)}); st != http.StatusUnauthorized {
		t.Errorf("empty secret's signature: %d %s, want 401", st, out)
	}
	if c := rec.calls(); len(c) != 0 {
		t.Fatalf("refused calls reached a handler: %q", c)
	}

	// Signed as GitHub signs: both handlers run, the failing one first
	// (plugins in key order), and the call reports it.
	st, out := e.rawCall("POST", path, body, map[string]string{"X-Hub-Signature-256": sign("s3cret", body)})
	if st != http.StatusInternalServerError || !strings.Contains(out, "handler a broke") || !strings.Contains(out, "nekro_test.hooks_b") {
		t.Fatalf("signed call: %d %s", st, out)
	}
	if c := rec.calls(); len(c) != 1 || c[0] != `{"n":1}` {
		t.Fatalf("after a signed call the handler got %q", c)
	}
	// nekro's own header, too.
	if st, out := e.rawCall("POST", path, body, map[string]string{"X-Nekro-Signature-256": sign("s3cret", body)}); st != http.StatusInternalServerError {
		t.Fatalf("X-Nekro-Signature-256: %d %s", st, out)
	}
	// The API token authenticates, and is not passed on to the handler.
	if st, out := e.rawCall("POST", path, body, map[string]string{"Authorization": "Bearer " + testToken}); st != http.StatusInternalServerError {
		t.Fatalf("token: %d %s", st, out)
	}
	if st, out := e.rawCall("POST", "/api/webhook/token_only", []byte("x"), map[string]string{"Authorization": "Bearer " + testToken}); st != http.StatusOK {
		t.Fatalf("token-only endpoint with the token: %d %s", st, out)
	}
	rec.mu.Lock()
	for _, a := range rec.auth {
		if a != "" {
			t.Errorf("a handler saw Authorization %q", a)
		}
	}
	rec.mu.Unlock()
	if c := rec.calls(); len(c) != 4 || c[3] != "token_only:x" {
		t.Fatalf("calls: %q", c)
	}

	// A changed secret applies to the next call.
	secretMu.Lock()
	secret = "rotated"
	secretMu.Unlock()
	if st, _ := e.rawCall("POST", path, body, map[string]string{"X-Hub-Signature-256": sign("s3cret", body)}); st != http.StatusUnauthorized {
		t.Fatalf("old secret after rotation: %d", st)
	}
	if st, _ := e.rawCall("POST", path, body, map[string]string{"X-Hub-Signature-256": sign("rotated", body)}); st != http.StatusInternalServerError {
		t.Fatalf("new secret: %d", st)
	}

	// Over 1 MiB: refused before any handler, even with the token.
	big := bytes.Repeat([]byte("a"), 1<<20+1)
	if st, out := e.rawCall("POST", path, big, map[string]string{"X-Hub-Signature-256": sign("rotated", big), "Authorization": "Bearer " + testToken}); st != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversize body: %d %s", st, out)
	}
	if c := rec.calls(); len(c) != 5 {
		t.Fatalf("the oversize body reached a handler: %d calls", len(c))
	}

	// Disabling the failing plugin leaves its handler out: the call succeeds.
	if st := e.call("POST", "/api/plugins/nekro_test.hooks_a/disable", nil, nil); st != http.StatusOK {
		t.Fatalf("disable: %d", st)
	}
	if st, out := e.rawCall("POST", path, body, map[string]string{"X-Hub-Signature-256": sign("rotated", body)}); st != http.StatusOK || strings.Contains(out, "broke") {
		t.Fatalf("with hooks_a disabled: %d %s", st, out)
	}
	// Disabling the other too: nobody serves the endpoint, no handler runs.
	if st := e.call("POST", "/api/plugins/nekro_test.hooks_b/disable", nil, nil); st != http.StatusOK {
		t.Fatalf("disable: %d", st)
	}
	if st, out := e.rawCall("POST", path, body, map[string]string{"X-Hub-Signature-256": sign("rotated", body)}); st != http.StatusNotFound {
		t.Fatalf("with both disabled: %d %s", st, out)
	}
	if c := rec.calls(); len(c) != 6 {
		t.Fatalf("calls after disabling: %d %q", len(c), c)
	}
	// Enabled again, at run time.
	if st := e.call("POST", "/api/plugins/nekro_test.hooks_b/enable", nil, nil); st != http.StatusOK {
		t.Fatalf("enable: %d", st)
	}
	// A new body: the one above was handled, so sent again it is a
	// duplicate, ignored.
	again := []byte(`{"n":3}`)
	if st, out := e.rawCall("POST", path, again, map[string]string{"X-Hub-Signature-256": sign("rotated", again)}); st != http.StatusOK ||
		!strings.Contains(out, "1 succeeded") {
		t.Fatalf("re-enabled: %d %s", st, out)
	}
	// Unknown endpoints and other methods.
	if st, _ := e.rawCall("POST", "/api/webhook/nobody", body, map[string]string{"Authorization": "Bearer " + testToken}); st != http.StatusNotFound {
		t.Fatalf("unknown endpoint: %d", st)
	}
	if st, _ := e.rawCall("GET", path, nil, nil); st != http.StatusUnauthorized {
		t.Fatalf("GET without token: %d", st)
	}
}

// Plugin routes: behind the token except public paths; 404 while the
// plugin is disabled.
func TestPluginRoutes(t *testing.T) {
	p := plugin.New(plugin.Meta{ModuleName: "routes", Author: "nekro_test", Version: "0"})
	mux := http.NewServeMux()
	mux.HandleFunc("/private", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "private auth=%q", r.Header.Get("Authorization"))
	})
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "public page") })
	mux.HandleFunc("/static/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "static "+r.URL.Path) })
	mux.HandleFunc("POST /upload", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		}
	})
	p.MountRoutes(mux, "/page", "/static/")
	e := startEnv(t, nil, func(o *serveOptions) {
		o.App.Host.Plugins = append(pluginhost.Registered(), p)
	})
	tok := map[string]string{"Authorization": "Bearer " + testToken}
	check := func(path string, h map[string]string, want int, sub string) {
		t.Helper()
		st, out := e.rawCall("GET", path, nil, h)
		if st != want || !strings.Contains(out, sub) {
			t.Fatalf("GET %s: %d %q, want %d %q", path, st, out, want, sub)
		}
	}
	check("/plugins/nekro_test.routes/private", nil, http.StatusUnauthorized, "token")
	check("/plugins/nekro_test.routes/private", map[string]string{"Authorization": "Bearer wrong"}, http.StatusUnauthorized, "token")
	check("/plugins/nekro_test.routes/private", tok, http.StatusOK, `private auth=""`)
	check("/plugins/nekro_test.routes/page", nil, http.StatusOK, "public page")
	check("/plugins/nekro_test.routes/page/x", nil, http.StatusUnauthorized, "token")
	check("/plugins/nekro_test.routes/static/a.css", nil, http.StatusOK, "static /static/a.css")
	check("/plugins/nekro_test.routes/static/../private", nil, http.StatusUnauthorized, "token") // cleaned to /private first
	check("/plugins/nekro_test.nope/page", nil, http.StatusNotFound, "no routes")
	if st, _ := e.rawCall("POST", "/plugins/nekro_test.routes/upload", bytes.Repeat([]byte("a"), 1<<20+1), tok); st != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversize upload: %d", st)
	}

	if st := e.call("POST", "/api/plugins/nekro_test.routes/disable", nil, nil); st != http.StatusOK {
		t.Fatalf("disable: %d", st)
	}
	check("/plugins/nekro_test.routes/page", nil, http.StatusNotFound, "no routes")
	check("/plugins/nekro_test.routes/private", tok, http.StatusNotFound, "no routes")
	if st := e.call("POST", "/api/plugins/nekro_test.routes/enable", nil, nil); st != http.StatusOK {
		t.Fatalf("enable: %d", st)
	}
	check("/plugins/nekro_test.routes/page", nil, http.StatusOK, "public page")
}
