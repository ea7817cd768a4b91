package pluginhost

import (
	"context"
	"net/http"

	"github.com/nekro-go/nekro/internal/pluginbridge"
	"github.com/nekro-go/nekro/plugin"
)

// Webhook is one endpoint a plugin mounted with Plugin.MountWebhook.
type Webhook = pluginbridge.WebhookData

// Webhooks returns p's webhook endpoints, in mount order.
func Webhooks(p *plugin.Plugin) []Webhook { return sdk.Webhooks(p) }

// Routes returns the handler p mounted with Plugin.MountRoutes (nil when
// none) and the paths it serves without the API token.
func Routes(p *plugin.Plugin) (h http.Handler, public []string) { return sdk.Routes(p) }

// shutdownKey is the context key of the server's shutdown signal.
type shutdownKey struct{}

// WithShutdown returns ctx carrying done, closed when the server shuts
// down: the server gives it to plugin routes' requests, so a route that
// streams (server-sent events) can end its answer then instead of holding
// the shutdown until its deadline.
func WithShutdown(ctx context.Context, done <-chan struct{}) context.Context {
	return context.WithValue(ctx, shutdownKey{}, done)
}

// Shutdown returns the shutdown signal WithShutdown put in ctx, or nil
// (a channel that never closes) when there is none.
func Shutdown(ctx context.Context) <-chan struct{} {
	done, _ := ctx.Value(shutdownKey{}).(<-chan struct{})
	return done
}
