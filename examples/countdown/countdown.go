// Package countdown is an example of a plugin that acts on its own: a
// sandbox method starts a background task that waits for a go-ahead,
// which arrives through the plugin's own HTTP route, and then wakes the
// agent with a system message. Its routes show the token rule: /status
// needs the API token, /public/hello does not.
package countdown

import (
	"fmt"
	"net/http"
	"time"

	"github.com/nekro-go/nekro/plugin"
)

var p = plugin.New(plugin.Meta{
	Name:        "Countdown example",
	ModuleName:  "countdown",
	Author:      "nekro_examples",
	Version:     "1.0.0",
	Description: "A background task woken through the plugin's HTTP route.",
})

func init() {
	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "start_countdown", Description: "Start a countdown that waits for a go-ahead.",
		Doc: `Start a countdown in this chat. It waits (up to 10 minutes) for a go-ahead
sent to the plugin's route POST /plugins/nekro_examples.countdown/go?chat=<chat>,
then tells you in a system message.

Returns:
    str: "started".`,
	}, func(ctx *plugin.Ctx, _ struct{}) (string, error) {
		err := p.StartTask(ctx, ctx.ChatKey(), "countdown", func(t *plugin.Ctx) error {
			t.Progress(0, "waiting for the go-ahead")
			word, err := t.WaitNotify("go", 10*time.Minute)
			if err != nil {
				return err
			}
			t.Progress(100, "went off")
			return t.PushSystem("the countdown went off: "+word, true)
		})
		return "started", err
	})

	mux := http.NewServeMux()
	mux.HandleFunc("POST /go", func(w http.ResponseWriter, r *http.Request) {
		chat, word := r.URL.Query().Get("chat"), r.URL.Query().Get("word")
		if !p.NotifyTask(chat, "countdown", "go", word) {
			http.Error(w, "no countdown waits in that chat", http.StatusNotFound)
			return
		}
		fmt.Fprintln(w, "sent")
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "counting") })
	mux.HandleFunc("GET /public/hello", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") })
	p.MountRoutes(mux, "/public/")
	plugin.Register(p)
}
