package pluginbridge

import (
	"context"
	"net/http"
)

// WebhookData is one MountWebhook: its endpoint, its secret (asked per
// call; "" accepts the API token only) and its handler. Package plugin
// keeps them in this type, and pluginhost.Webhook is it, so the server
// reads them as mounted.
type WebhookData struct {
	Endpoint string
	Secret   func() string
	Handle   func(ctx context.Context, body []byte, header http.Header) error
}
