package pluginbridge

import (
	"context"
	"net/http"
)

// Set by package plugin's init, for the server's webhooks and plugin
// routes.
var (
	// Webhooks(*plugin.Plugin) lists its MountWebhook endpoints, in mount
	// order.
	Webhooks func(p any) []WebhookData
	// Routes(*plugin.Plugin) returns MountRoutes' handler (nil when none)
	// and its public paths.
	Routes func(p any) (h http.Handler, public []string)
)

// WebhookData is one MountWebhook: its endpoint, its secret (asked per
// call; "" accepts the API token only) and its handler.
type WebhookData struct {
	Endpoint string
	Secret   func() string
	Handle   func(ctx context.Context, body []byte, header http.Header) error
}
