package plugin

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/nekro-go/nekro/internal/pluginbridge"
)

// webMounts are a plugin's webhooks and HTTP routes (declared in init,
// read by the server on each request).
type webMounts struct {
	mu       sync.RWMutex
	webhooks []pluginbridge.WebhookData
	routes   http.Handler
	public   []string
}

var endpointRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// MountWebhook serves POST /api/webhook/{endpoint} with handler, which
// gets the request's raw body (at most 1 MiB; a larger one is refused
// with 413) and headers. Every call is authenticated before any handler
// runs: by the server's API token (Authorization: Bearer <token>), or by
// an HMAC-SHA256 signature of the raw body under the key secret returns,
// sent as GitHub does (X-Hub-Signature-256: sha256=<hex>; the header
// X-Nekro-Signature-256 is read the same way). secret is asked on every
// call, so a plugin setting (one tagged secret:"true") changes it
// without a restart; an empty secret, or a nil func, accepts the API
// token only. A call authenticated by no handler's secret nor the token
// gets 401 and reaches no handler.
//
// Several plugins may mount one endpoint: each enabled plugin whose
// secret signs the call (all of them, with the token) is called in turn,
// and one failing handler does not stop the others. A disabled plugin's
// handlers are not called. ctx ends when the caller leaves or after 30 s.
// endpoint is letters, digits, '.', '_' and '-'; a bad one, or mounting
// one endpoint twice, panics.
func (p *Plugin) MountWebhook(endpoint string, secret func() string,
	handler func(ctx context.Context, body []byte, header http.Header) error) {
	if !endpointRE.MatchString(endpoint) {
		panic(fmt.Sprintf("plugin %s: webhook endpoint %q must be letters, digits, '.', '_' and '-'", p.Key(), endpoint))
	}
	if handler == nil {
		panic(fmt.Sprintf("plugin %s: webhook %s has no handler", p.Key(), endpoint))
	}
	if secret == nil {
		secret = func() string { return "" }
	}
	w := &p.web
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range w.webhooks {
		if h.Endpoint == endpoint {
			panic(fmt.Sprintf("plugin %s: webhook %s mounted twice", p.Key(), endpoint))
		}
	}
	w.webhooks = append(w.webhooks, pluginbridge.WebhookData{Endpoint: endpoint, Secret: secret, Handle: handler})
}

// MountRoutes serves h under /plugins/{key}/ (the prefix stripped, so h
// sees /, /page, ...). Every request needs the API token (Authorization:
// Bearer <token>) except those whose path is one of public: an exact
// path ("/index.html"), or a subtree when it ends in "/" ("/static/").
// While the plugin is disabled every request gets 404. Request bodies
// are capped at 1 MiB. A plugin mounts one handler; a second call, or a
// public path not starting with "/", panics.
func (p *Plugin) MountRoutes(h http.Handler, public ...string) {
	if h == nil {
		panic(fmt.Sprintf("plugin %s: MountRoutes of a nil handler", p.Key()))
	}
	for _, pub := range public {
		if !strings.HasPrefix(pub, "/") {
			panic(fmt.Sprintf("plugin %s: public route %q must start with /", p.Key(), pub))
		}
	}
	w := &p.web
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.routes != nil {
		panic(fmt.Sprintf("plugin %s: MountRoutes called twice", p.Key()))
	}
	w.routes, w.public = h, slices.Clone(public)
}
