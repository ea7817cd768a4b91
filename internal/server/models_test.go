package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/models"
	"github.com/nekro-go/nekro/internal/presets"
)

// newUserToken adds a user who is a member of chats and returns the
// user's token.
func (e *env) newUserToken(id string, chats ...string) string {
	e.t.Helper()
	var u struct{ Token string }
	if st := e.call("POST", "/api/users", map[string]string{"user_id": id}, &u); st != http.StatusCreated || u.Token == "" {
		e.t.Fatalf("add user %s: %d", id, st)
	}
	for _, c := range chats {
		if st := e.call("PUT", "/api/chats/"+c+"/members/"+id, nil, nil); st/100 != 2 {
			e.t.Fatalf("make %s a member of %s: %d", id, c, st)
		}
	}
	return u.Token
}

func (e *env) historyAs(token, chatKey string) []chat.Message {
	e.t.Helper()
	var out struct {
		Messages []chat.Message `json:"messages"`
	}
	if st := e.callToken(token, "GET", "/api/chats/"+chatKey+"/messages", nil, &out); st != http.StatusOK {
		e.t.Fatalf("history as a user: %d", st)
	}
	return out.Messages
}

// A model group added through the API answers the next turn, with no
// restart; when it fails after its retries, its fallback answers and the
// turn says which group did; keys are never answered; the Test button's
// endpoint reports an answer and an error.
func TestModelGroupsApplyToTheNextTurn(t *testing.T) {
	e := startEnv(t, func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "from the seed"} }, nil)
	other, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(r.Last(), "run some code") {
			return llmtest.Code(`send_msg_text(_ck, "ran")`)
		}
		return llmtest.Reply{Text: "from " + r.Model}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	down, err := llmtest.Start(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Status: http.StatusBadGateway, Text: "upstream http://10.1.2.3:8080/v1 is gone"}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()

	var got models.Settings
	if st := e.call("GET", "/api/models", nil, &got); st != http.StatusOK || len(got.Groups) != 1 || got.Groups[0].Name != "chat" ||
		!got.Groups[0].HasKey || got.Groups[0].APIKey != "" || got.Source != models.SourceEnv {
		t.Fatalf("the environment's seed: %d %+v", st, got)
	}
	put := models.Settings{Default: "main", Groups: []models.Group{
		{Name: "main", BaseURL: other.URL, Model: "main-model", APIKey: "secret-main-key"},
	}}
	if st := e.call("PUT", "/api/models", put, &got); st != http.StatusOK || got.Default != "main" || !got.Groups[0].HasKey {
		t.Fatalf("put: %d %+v", st, got)
	}
	raw := e.callRaw("GET", "/api/models")
	if strings.Contains(raw, "secret-main-key") {
		t.Fatalf("a key was answered: %s", raw)
	}
	e.post("m1", "u1", "Ann", "hello")
	turns := e.waitTurns("m1", 1)
	if turns[0].Status != chat.TurnDone || turns[0].ModelGroup != "main" || len(other.RequestsFor("m1")) != 1 {
		t.Fatalf("the new group did not answer the next turn: %+v, %d requests", turns[0], len(other.RequestsFor("m1")))
	}
	if r := other.RequestsFor("m1")[0]; r.Model != "main-model" || r.Auth != "Bearer secret-main-key" {
		t.Errorf("request: model %q auth %q", r.Model, r.Auth)
	}

	// main is down now; backup answers, and the turn says so.
	put = models.Settings{Default: "main", Groups: []models.Group{
		{Name: "main", BaseURL: down.URL, Model: "broken", Fallback: "backup"},
		{Name: "backup", BaseURL: other.URL, Model: "backup-model"},
	}}
	if st := e.call("PUT", "/api/models", put, nil); st != http.StatusOK {
		t.Fatalf("put: %d", st)
	}
	e.post("m1", "u1", "Ann", "again")
	turns = e.waitTurns("m1", 2)
	if turns[1].Status != chat.TurnDone || turns[1].ModelGroup != "backup" || len(down.RequestsFor("m1")) == 0 {
		t.Fatalf("fallback: %+v", turns[1])
	}
	if h := texts(e.history("m1")); h[len(h)-1] != "assistant: from backup-model" {
		t.Errorf("history %q", h)
	}
	// A run records the group whose code it ran.
	e.post("m1", "u1", "Ann", "run some code")
	if turns := e.waitTurns("m1", 3); turns[2].ModelGroup != "backup" {
		t.Fatalf("turn: %+v", turns[2])
	}
	if rs := e.runs("m1"); len(rs) != 1 || rs[0].ModelGroup != "backup" {
		t.Errorf("runs: %+v", rs)
	}

	var res struct {
		OK     bool   `json:"ok"`
		Answer string `json:"answer"`
		Error  string `json:"error"`
	}
	if st := e.call("POST", "/api/models/test", map[string]string{"name": "backup"}, &res); st != http.StatusOK || !res.OK || res.Answer != "from backup-model" {
		t.Errorf("test backup: %d %+v", st, res)
	}
	if st := e.call("POST", "/api/models/test", models.Group{Name: "new", BaseURL: down.URL, Model: "x"}, &res); st != http.StatusOK || res.OK ||
		!strings.Contains(res.Error, "502") {
		t.Errorf("test a group that is down: %d %+v", st, res)
	}
	if st := e.call("PUT", "/api/models", models.Settings{Default: "nope", Groups: put.Groups}, nil); st != http.StatusBadRequest {
		t.Errorf("a default that is no group: %d", st)
	}

	// User tokens may not read or change the groups, nor any preset.
	user := e.newUserToken("ann", "m1")
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/api/models", nil}, {"PUT", "/api/models", put}, {"POST", "/api/models/test", map[string]string{"name": "main"}},
		{"POST", "/api/presets", presets.Preset{Name: "x", Content: "y"}}, {"PUT", "/api/presets/1", presets.Preset{Name: "x"}},
		{"DELETE", "/api/presets/1", nil}, {"PUT", "/api/chats/m1/preset", map[string]int{"preset": 1}},
		{"POST", "/api/presets/import", presets.Reference{Name: "x", Content: "y"}}, {"GET", "/api/chats/m1/prompt", nil},
	} {
		if st := e.callToken(user, c.method, c.path, c.body, nil); st != http.StatusForbidden {
			t.Errorf("%s %s with a user token: %d, want 403", c.method, c.path, st)
		}
	}
}

// callRaw answers the body of an operator's call as text.
func (e *env) callRaw(method, path string) string {
	e.t.Helper()
	var raw json.RawMessage
	if st := e.call(method, path, nil, &raw); st != http.StatusOK {
		e.t.Fatalf("%s %s: %d", method, path, st)
	}
	return string(raw)
}

// A persona chosen for a chat changes that chat's next prompt and no
// other chat's; its language sets the contract's; the default applies to
// chats that chose none; import and export speak the reference's format.
func TestPersonaChangesOnlyItsChat(t *testing.T) {
	e := startEnv(t, func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "meow"} }, nil)
	var cat presets.Preset
	if st := e.call("POST", "/api/presets", presets.Preset{Name: "Neko", Description: "a cat girl", Tags: []string{"cat"},
		Content: "You are Neko, a cat girl who ends every sentence with nya."}, &cat); st != http.StatusCreated || cat.ID == 0 {
		t.Fatalf("create: %d %+v", st, cat)
	}
	var fox presets.Preset
	if st := e.call("POST", "/api/presets", presets.Preset{Name: "狐狸", Content: "你是一只狐狸。", Lang: "zh"}, &fox); st != http.StatusCreated {
		t.Fatalf("create: %d", st)
	}
	if st := e.call("PUT", "/api/chats/p1/preset", map[string]int64{"preset": cat.ID}, nil); st != http.StatusOK {
		t.Fatalf("choose: %d", st)
	}
	if st := e.call("PUT", "/api/chats/p3/preset", map[string]int64{"preset": fox.ID}, nil); st != http.StatusOK {
		t.Fatalf("choose: %d", st)
	}
	if st := e.call("PUT", "/api/chats/p1/preset", map[string]int64{"preset": 999}, nil); st != http.StatusNotFound {
		t.Errorf("choosing a missing preset: %d", st)
	}
	for _, c := range []string{"p1", "p2", "p3"} {
		e.post(c, "u1", "Ann", "hi")
		e.waitTurns(c, 1)
	}
	system := func(c string) string {
		rs := e.model.RequestsFor(c)
		if len(rs) == 0 {
			t.Fatalf("no request for %s", c)
		}
		return rs[len(rs)-1].Messages[0].Content.String()
	}
	if s := system("p1"); !strings.Contains(s, "ends every sentence with nya") || !strings.Contains(s, "You are the assistant of a chat") {
		t.Errorf("p1's system prompt has no persona:\n%s", s)
	}
	if s := system("p2"); strings.Contains(s, "nya") || strings.Contains(s, "<persona") {
		t.Errorf("p2 chose no persona, but its prompt has one:\n%s", s)
	}
	if s := system("p3"); !strings.Contains(s, "你是一只狐狸") || !strings.Contains(s, "你是一个聊天的助手") {
		t.Errorf("p3's prompt is not the Chinese persona's:\n%s", s)
	}
	// The default applies to p2 from its next turn; p1 keeps its own.
	cat.Default = false
	fox.Default = true
	if st := e.call("PUT", "/api/presets/"+itoa(fox.ID), fox, nil); st != http.StatusOK {
		t.Fatalf("update: %d", st)
	}
	var prompt struct {
		Messages []struct{ Content string } `json:"messages"`
	}
	if st := e.call("GET", "/api/chats/p2/prompt", nil, &prompt); st != http.StatusOK || !strings.Contains(prompt.Messages[0].Content, "你是一只狐狸") {
		t.Errorf("p2 after a default was set: %d %+v", st, prompt)
	}
	if st := e.call("GET", "/api/chats/p1/prompt", nil, &prompt); st != http.StatusOK || !strings.Contains(prompt.Messages[0].Content, "nya") {
		t.Errorf("p1 after a default was set: %d", st)
	}

	var ref presets.Reference
	if st := e.call("GET", "/api/presets/"+itoa(cat.ID)+"/export", nil, &ref); st != http.StatusOK || ref.Tags != "cat" || ref.Content != cat.Content {
		t.Fatalf("export: %d %+v", st, ref)
	}
	var imported struct{ Presets []presets.Preset }
	if st := e.call("POST", "/api/presets/import", []presets.Reference{ref, {Name: "Plain", Content: "Just plain.", Tags: "a,b"}},
		&imported); st != http.StatusCreated || len(imported.Presets) != 2 || imported.Presets[1].Tags[1] != "b" {
		t.Fatalf("import: %d %+v", st, imported)
	}
	if st := e.call("DELETE", "/api/presets/"+itoa(cat.ID), nil, nil); st != http.StatusOK {
		t.Fatalf("delete: %d", st)
	}
	if st := e.call("GET", "/api/chats/p1/prompt", nil, &prompt); st != http.StatusOK || !strings.Contains(prompt.Messages[0].Content, "你是一只狐狸") {
		t.Errorf("p1 after its persona was deleted should have the default: %d", st)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A turn that fails leaves its chat's users one short message, with no
// internals, and the details for the operator; notes for the model (the
// duplicate filter's) are not among the messages users see, nor the chat
// list's preview.
func TestFailedTurnTellsUsersOnceWithoutInternals(t *testing.T) {
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case r.ChatKey() == "f1":
			return llmtest.Reply{Status: http.StatusInternalServerError, Text: "boom at http://10.9.8.7:9999/v1/chat/completions"}
		case !r.Contains("[Sandbox Output]") && !r.Contains("Identical"):
			return llmtest.Code(`send_msg_text(_ck, "same words")
send_msg_text(_ck, "same words")`)
		}
		return llmtest.Code(`print("done")`)
	}, nil)
	user := e.newUserToken("ann", "f1", "d1")
	// The user's event stream, open while the turn fails.
	req, _ := http.NewRequest("GET", e.base+"/api/chats/f1/events", nil)
	req.Header.Set("Authorization", "Bearer "+user)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("events as a user: %v %v", resp, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	sc.Scan() // subscribed
	if st := e.callToken(user, "POST", "/api/chats/f1/messages", map[string]string{"text": "hello"}, nil); st != http.StatusAccepted {
		t.Fatalf("post: %d", st)
	}
	var streamed []string
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev chat.Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Message != nil {
			streamed = append(streamed, string(ev.Message.Role)+": "+ev.Message.Text)
		}
		if ev.Turn != nil {
			streamed = append(streamed, "turn "+ev.Turn.Status+" "+ev.Turn.Error)
			if ev.Turn.Status != chat.TurnRunning {
				break
			}
		}
	}
	if want := "user: hello|turn running |assistant: Sorry, I could not answer this time. Please try again later.|turn failed "; strings.Join(streamed, "|") != want {
		t.Errorf("the user's event stream:\n%s\nwant:\n%s", strings.Join(streamed, "\n"), strings.ReplaceAll(want, "|", "\n"))
	}
	turns := e.waitTurns("f1", 1)
	if turns[0].Status != chat.TurnFailed {
		t.Fatalf("turn: %+v", turns[0])
	}
	seen := e.historyAs(user, "f1")
	var assistant []string
	for _, m := range seen {
		if m.Role == chat.System {
			t.Errorf("a user sees a system message: %q", m.Text)
		}
		if m.Role == chat.Assistant {
			assistant = append(assistant, m.Text)
		}
		if strings.Contains(m.Text, "http") || strings.Contains(m.Text, "10.9.8.7") || strings.Contains(m.Text, "nekro:") {
			t.Errorf("a user sees internals: %q", m.Text)
		}
	}
	if len(assistant) != 1 || !strings.Contains(assistant[0], "could not answer") {
		t.Errorf("the user's messages: %q", texts(seen))
	}
	var userTurns struct{ Turns []chat.Turn }
	if st := e.callToken(user, "GET", "/api/chats/f1/turns", nil, &userTurns); st != http.StatusOK || len(userTurns.Turns) != 1 ||
		userTurns.Turns[0].Error != "" {
		t.Errorf("a user's turns show the error: %d %+v", st, userTurns)
	}
	// The operator sees why.
	if h := strings.Join(texts(e.history("f1")), "\n"); !strings.Contains(h, "10.9.8.7") {
		t.Errorf("the operator's history lacks the details:\n%s", h)
	}
	if ts := e.turns("f1"); !strings.Contains(ts[0].Error, "500") {
		t.Errorf("the operator's turn lacks the error: %+v", ts[0])
	}

	// The duplicate filter's note is for the model only.
	if st := e.callToken(user, "POST", "/api/chats/d1/messages", map[string]string{"text": "say it twice"}, nil); st != http.StatusAccepted {
		t.Fatalf("post: %d", st)
	}
	e.waitTurns("d1", 1)
	if h := strings.Join(texts(e.history("d1")), "\n"); !strings.Contains(h, "System Alert") {
		t.Fatalf("the duplicate filter left no note (the test needs it):\n%s", h)
	}
	for _, m := range e.historyAs(user, "d1") {
		if strings.Contains(m.Text, "System Alert") || strings.Contains(m.Text, "SPAM") {
			t.Errorf("a user sees the note for the model: %q", m.Text)
		}
	}
	var list struct{ Chats []chat.Summary }
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st := e.callToken(user, "GET", "/api/chats", nil, &list); st != http.StatusOK {
			t.Fatalf("chat list: %d", st)
		}
		if len(list.Chats) == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, c := range list.Chats {
		if c.LastMessage.Role == chat.System || strings.Contains(c.LastMessage.Text, "System Alert") {
			t.Errorf("the chat list previews a note for the model: %+v", c.LastMessage)
		}
	}
}
