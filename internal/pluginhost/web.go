package pluginhost

import (
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
