package cli_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

// The plugin control plane as an operator meets it: the standard binary's
// `nekro serve` with its built-in plugins, a scripted model, the API and
// the command line next to it. A note lands in its own chat's prompt and
// no other; turning nekro.note off takes its methods out of the next
// turn's prompt and its calls; a settings change applies without a
// restart; a command is answered with no model request.
func TestControlPlaneThroughNekroServe(t *testing.T) {
	model, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		// The newest user message: what follows the last "(user id u1):".
		last := r.Last()
		if i := strings.LastIndex(last, "(user id u1):"); i >= 0 {
			last = last[i:]
		}
		switch {
		case strings.Contains(last, "remember"):
			return llmtest.Code(`set_note(_ck, "favourite colour", "the user likes teal")`)
		case strings.Contains(last, "probe"):
			return llmtest.Code(`
try:
    print(get_note(_ck, "favourite colour"))
except NameError:
    send_msg_text(_ck, "no get_note here")
else:
    send_msg_text(_ck, "get_note is here")`)
		}
		return llmtest.Code(`send_msg_text(_ck, "hello")`)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	data := testutil.DataDir(t)
	srv := testutil.Serve(t, data, "tok-control", "NEKRO_LLM_BASE_URL="+model.URL, "NEKRO_LLM_MODEL=scripted")
	api, logs := srv.API, srv.Logs
	// say posts a message and waits until the chat's history holds want.
	say := func(chat, text, want string) string {
		t.Helper()
		if st, body := api("POST", "/api/chats/"+chat+"/messages", map[string]string{"user_id": "u1", "text": text}); st != http.StatusAccepted {
			t.Fatalf("post %q: %d %s", text, st, body)
		}
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if _, h := api("GET", "/api/chats/"+chat+"/messages", nil); strings.Contains(h, want) {
				return h
			}
		}
		_, h := api("GET", "/api/chats/"+chat+"/messages", nil)
		t.Fatalf("chat %s never showed %q:\n%s\n%s", chat, want, h, logs.String())
		return ""
	}
	lastPrompt := func(chat string) string {
		reqs := model.RequestsFor(chat)
		return reqs[len(reqs)-1].Messages[1].Content.String()
	}

	// A note made in chat a shows in a's next prompt, not in b's.
	say("a", "please remember my favourite colour", "Note `favourite colour` set") // set_note's recorded result
	say("a", "hi again", "hello")
	say("b", "hi", "hello")
	if !strings.Contains(lastPrompt("a"), "the user likes teal") || strings.Contains(lastPrompt("b"), "teal") {
		t.Errorf("the note is in the wrong prompts:\na: %s\nb: %s", lastPrompt("a"), lastPrompt("b"))
	}

	// Turned off from the command line, next to the server.
	if r := testutil.RunNekro(t, nil, "--data", data, "plugins", "disable", "nekro.note"); r.Code != 0 {
		t.Fatalf("plugins disable: %+v", r)
	}
	time.Sleep(1500 * time.Millisecond) // the server looks every second
	say("a", "probe", "no get_note here")
	reqs := model.RequestsFor("a")
	if sys := reqs[len(reqs)-1].Messages[0].Content.String(); strings.Contains(sys, "* get_note(") || strings.Contains(lastPrompt("a"), "teal") {
		t.Errorf("a disabled plugin's methods or notes are still in the prompt")
	}
	if st, _ := api("POST", "/api/plugins/nekro.note/enable", nil); st != http.StatusOK {
		t.Fatalf("enable: %d", st)
	}
	say("a", "probe again", "get_note is here")

	// A setting changed through the API applies to the next run.
	if st, body := api("PUT", "/api/plugins/nekro.basic/config", map[string]any{"STRICT_MESSAGE_FILTER": "yes"}); st != http.StatusBadRequest ||
		!strings.Contains(body, "STRICT_MESSAGE_FILTER") {
		t.Errorf("a bad setting: %d %s", st, body)
	}
	if st, body := api("PUT", "/api/plugins/nekro.basic/config", map[string]any{"ENABLE_VIEW_STR_CONTENT": false}); st != http.StatusOK {
		t.Fatalf("config: %d %s", st, body)
	}
	if _, out := api("POST", "/api/chats/a/exec", map[string]string{"code": "print('view_str_content' in globals())"}); !strings.Contains(out, `"output": "False\n"`) {
		t.Errorf("view_str_content is still offered: %s", out)
	}

	// A command: answered by its plugin, the model never asked.
	before := len(model.Requests())
	h := say("c", "/help", "Commands:")
	if !strings.Contains(h, "/help - list the commands you may use") || len(model.Requests()) != before {
		t.Errorf("/help: %d model requests\n%s", len(model.Requests())-before, h)
	}
}
