package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/nekro-go/nekro/internal/deliveries"
	"github.com/nekro-go/nekro/internal/pluginhost"
)

// Plugins' webhooks and HTTP routes (Plugin.MountWebhook, MountRoutes).
const (
	// maxWebhookBody caps a webhook call's body, and a plugin route's.
	maxWebhookBody = 1 << 20
	// webhookTimeout bounds one webhook call's handlers together.
	webhookTimeout = 30 * time.Second
)

// deliveryIDHeaders name a delivery, one id per delivery that the
// sender's retries keep: GitHub's, Gitea's, the Standard Webhooks
// specification's, and nekro's own for other senders. The first one
// present counts. (X-Request-Id is not one: proxies set it per request.)
var deliveryIDHeaders = []string{"X-GitHub-Delivery", "X-Gitea-Delivery", "Webhook-Id", "X-Delivery-Id"}

// deliveryKeys are what a call is known by among the deliveries handled
// (deliveries.Store): its delivery id, and, when only a signature
// authenticated it, its body's SHA-256, which the signature covers while
// the id header is no part of it. A call by the API token (the operator's)
// is known by its id alone, so the operator may post one body twice.
func deliveryKeys(h http.Header, body []byte, byToken bool) (id string, keys []string) {
	for _, name := range deliveryIDHeaders {
		if v := strings.TrimSpace(h.Get(name)); v != "" {
			id = v
			keys = append(keys, "id:"+v)
			break
		}
	}
	if !byToken {
		sum := sha256.Sum256(body)
		keys = append(keys, "sha256:"+hex.EncodeToString(sum[:]))
	}
	return id, keys
}

// signatureHeaders carry "sha256=<hex>", an HMAC-SHA256 of the raw body:
// GitHub's header, and nekro's own for other senders.
var signatureHeaders = []string{"X-Hub-Signature-256", "X-Nekro-Signature-256"}

// tokenOK reports whether r carries the API token, compared in constant
// time.
func (s *Server) tokenOK(r *http.Request) bool {
	got := []byte(r.Header.Get("Authorization"))
	return subtle.ConstantTimeCompare(got, []byte("Bearer "+s.Token)) == 1
}

// signatures returns the request's body signatures, decoded; malformed
// ones are left out.
func signatures(h http.Header) [][]byte {
	var out [][]byte
	for _, name := range signatureHeaders {
		for _, v := range h.Values(name) {
			v = strings.TrimSpace(v)
			hexSig, ok := strings.CutPrefix(v, "sha256=")
			if !ok {
				continue
			}
			if b, err := hex.DecodeString(hexSig); err == nil && len(b) == sha256.Size {
				out = append(out, b)
			}
		}
	}
	return out
}

// signedBy reports whether one of sigs is body's HMAC-SHA256 under
// secret (never for an empty secret).
func signedBy(body []byte, secret string, sigs [][]byte) bool {
	if secret == "" || len(sigs) == 0 {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	want := mac.Sum(nil)
	ok := false
	for _, sig := range sigs {
		if hmac.Equal(sig, want) {
			ok = true
		}
	}
	return ok
}

type webhookError struct {
	Plugin string `json:"plugin"`
	Error  string `json:"error"`
}

// webhook answers POST /api/webhook/{endpoint}: the enabled plugins that
// mounted the endpoint and accept the call's authentication (the API
// token, or a signature under their secret) get the raw body, in turn.
// 404: no enabled plugin serves the endpoint; 413: the body is over
// 1 MiB; 401: no handler accepts the call, and none ran; 500: a handler
// failed (the others still ran). A delivery handled before (its delivery
// id, or its signed body, within deliveries.Window) runs no handler and is
// answered 200 with "duplicate": true, since senders retry on any other
// status; one whose handlers failed is forgotten, so a retry runs them.
func (s *Server) webhook(w http.ResponseWriter, r *http.Request) {
	endpoint := r.PathValue("endpoint")
	type target struct {
		key string
		h   pluginhost.Webhook
	}
	var targets []target
	for _, p := range s.host.Registry().Plugins() { // enabled ones, now
		for _, h := range pluginhost.Webhooks(p) {
			if h.Endpoint == endpoint {
				targets = append(targets, target{p.Key(), h})
			}
		}
	}
	if len(targets) == 0 {
		writeError(w, http.StatusNotFound, "no enabled plugin serves the webhook %q", endpoint)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "webhook body over %d bytes", maxWebhookBody)
		} else {
			writeError(w, http.StatusBadRequest, "webhook body: %v", err)
		}
		return
	}
	byToken := s.tokenOK(r)
	sigs := signatures(r.Header)
	var run []target
	for _, t := range targets {
		if byToken || signedBy(body, t.h.Secret(), sigs) {
			run = append(run, t)
		}
	}
	if len(run) == 0 {
		s.log.Warn("webhook call refused: no valid signature nor API token", "endpoint", endpoint, "remote", r.RemoteAddr)
		writeError(w, http.StatusUnauthorized,
			"webhook %q: sign the raw body with the endpoint's secret (X-Hub-Signature-256: sha256=<hex HMAC-SHA256>) or send Authorization: Bearer <API token>", endpoint)
		return
	}
	id, keys := deliveryKeys(r.Header, body, byToken)
	fresh, err := s.parts.Deliveries.Claim(r.Context(), endpoint, keys...)
	if err != nil {
		s.log.Error("webhook delivery not checked for a replay", "endpoint", endpoint, "err", err)
		writeError(w, http.StatusServiceUnavailable, "webhook %q: the deliveries already handled cannot be read now; send it again later", endpoint)
		return
	}
	if !fresh {
		s.log.Warn("webhook delivery refused: handled before (a replay or a retry)", "endpoint", endpoint,
			"delivery", id, "remote", r.RemoteAddr)
		writeJSON(w, http.StatusOK, map[string]any{
			"success":   true,
			"duplicate": true,
			"message": fmt.Sprintf("webhook %s: this delivery was handled before (the same delivery id, or the same signed body, within %s): ignored",
				endpoint, deliveries.Window),
		})
		return
	}
	header := r.Header.Clone()
	header.Del("Authorization") // the API token is no plugin's business
	ctx, cancel := context.WithTimeout(r.Context(), webhookTimeout)
	defer cancel()
	results, failures := []string{}, []webhookError{}
	for _, t := range run {
		if err := callWebhook(ctx, t.h, body, header.Clone()); err != nil {
			s.log.Error("webhook handler failed", "endpoint", endpoint, "plugin", t.key, "err", err)
			failures = append(failures, webhookError{t.key, err.Error()})
			continue
		}
		results = append(results, t.key)
	}
	status := http.StatusOK
	if len(failures) > 0 {
		status = http.StatusInternalServerError
		// The sender retries a failed delivery: let it through then.
		if err := s.parts.Deliveries.Release(context.WithoutCancel(r.Context()), endpoint, keys...); err != nil {
			s.log.Error("webhook delivery not released: a retry of it will be ignored", "endpoint", endpoint, "delivery", id, "err", err)
		}
	}
	writeJSON(w, status, map[string]any{
		"success": len(failures) == 0,
		"message": fmt.Sprintf("webhook %s handled: %d succeeded, %d failed", endpoint, len(results), len(failures)),
		"data":    map[string]any{"results": results, "errors": failures},
	})
}

// callWebhook runs one handler, turning a panic into an error.
func callWebhook(ctx context.Context, h pluginhost.Webhook, body []byte, header http.Header) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return h.Handle(ctx, body, header)
}

// pluginRoutes serves /plugins/{key}/...: the handler of the enabled
// plugin key (404 when it is disabled, unknown or mounted none), behind
// the API token except on the paths it made public.
func (s *Server) pluginRoutes(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	var h http.Handler
	var public []string
	for _, p := range s.host.Registry().Plugins() { // enabled ones, now
		if p.Key() == key {
			h, public = pluginhost.Routes(p)
		}
	}
	if h == nil {
		writeError(w, http.StatusNotFound, "no routes for plugin %s (unknown, disabled, or it mounted none)", key)
		return
	}
	prefix := "/plugins/" + key
	if !isPublic(strings.TrimPrefix(r.URL.Path, prefix), public) && !s.tokenOK(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="nekro"`)
		writeError(w, http.StatusUnauthorized, "missing or wrong API token: send Authorization: Bearer <token>")
		return
	}
	r.Header.Del("Authorization")
	r.Body = http.MaxBytesReader(w, r.Body, maxWebhookBody)
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("plugin route panicked", "plugin", key, "path", r.URL.Path, "panic", v)
			writeError(w, http.StatusInternalServerError, "plugin %s failed", key)
		}
	}()
	// A route's streamed answer may end at shutdown (pluginhost.Shutdown).
	r = r.WithContext(pluginhost.WithShutdown(r.Context(), s.streamsDone))
	http.StripPrefix(prefix, h).ServeHTTP(w, r)
}

// isPublic reports whether path (below the plugin's prefix) is one of
// public: equal to one, or under one ending in "/".
func isPublic(path string, public []string) bool {
	for _, p := range public {
		if path == p || strings.HasSuffix(p, "/") && strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}
