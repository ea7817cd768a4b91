package server_test

import (
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
)

// runLog asks GET /api/runs with token and the query q and returns the
// runs' ids and chats.
func (e *env) runLog(token string, q url.Values) (ids []string, chats []string) {
	e.t.Helper()
	var out struct {
		Runs []chat.Run `json:"runs"`
	}
	if st := e.callToken(token, "GET", "/api/runs?"+q.Encode(), nil, &out); st != http.StatusOK {
		e.t.Fatalf("GET /api/runs?%s: %d", q.Encode(), st)
	}
	for _, r := range out.Runs {
		ids = append(ids, r.RunID)
		if !slices.Contains(chats, r.ChatKey) {
			chats = append(chats, r.ChatKey)
		}
	}
	return ids, chats
}

// The run log finds runs across chats by a word of their output and by
// chat, stop type, method and time; a user token finds only its chats'
// runs and may not read the stats, whose counts follow what happened.
func TestRunLogAndStatsOverTheAPI(t *testing.T) {
	e := startEnv(t, func(r llmtest.Request) llmtest.Reply {
		return llmtest.Code(`print("the aardvark of " + _ck)
send_msg_text(_ck, "done")`)
	}, nil)
	before := time.Now()
	e.post("chat-one", "op", "Op", "hello")
	e.waitTurns("chat-one", 1)
	if st := e.call("POST", "/api/chats/chat-two/exec", map[string]string{"code": `raise ValueError("a wombat")`}, nil); st != 200 {
		t.Fatalf("exec: %d", st)
	}
	// A user's own chat, with a turn of its own.
	var u struct{ Token string }
	if st := e.call("POST", "/api/users", map[string]string{"user_id": "ursula", "name": "Ursula"}, &u); st != http.StatusCreated {
		t.Fatalf("add user: %d", st)
	}
	if st := e.callToken(u.Token, "POST", "/api/chats/ursula-chat/messages", map[string]string{"text": "hi"}, nil); st != http.StatusAccepted {
		t.Fatalf("user post: %d", st)
	}
	e.waitTurns("ursula-chat", 1)

	for _, c := range []struct {
		q     url.Values
		chats []string
	}{
		{url.Values{"q": {"aardvark"}}, []string{"ursula-chat", "chat-one"}},
		{url.Values{"q": {"AARDVARK of chat-one"}}, []string{"chat-one"}},
		{url.Values{"q": {"wombat"}}, []string{"chat-two"}},
		{url.Values{"chat": {"chat-two"}}, []string{"chat-two"}},
		{url.Values{"stop_type": {"error"}}, []string{"chat-two"}},
		{url.Values{"method": {"send_msg_text"}}, []string{"ursula-chat", "chat-one"}},
		{url.Values{"since": {before.Add(-time.Second).UTC().Format(time.RFC3339)}, "chat": {"chat-one"}}, []string{"chat-one"}},
		{url.Values{"since": {time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}}, nil},
		{url.Values{"until": {before.Add(-time.Minute).UTC().Format(time.RFC3339)}}, nil},
		{url.Values{"since": {"1h"}, "q": {"wombat"}}, []string{"chat-two"}},
	} {
		if _, chats := e.runLog(testToken, c.q); !slices.Equal(chats, c.chats) {
			t.Errorf("?%s: runs of %v, want %v", c.q.Encode(), chats, c.chats)
		}
	}
	ids, _ := e.runLog(testToken, url.Values{"limit": {"2"}})
	older, _ := e.runLog(testToken, url.Values{"limit": {"2"}, "before": {ids[1]}})
	if len(ids) != 2 || len(older) != 1 || slices.Contains(ids, older[0]) {
		t.Errorf("pages %v then %v", ids, older)
	}
	var one chat.Run
	if st := e.call("GET", "/api/runs/"+older[0], nil, &one); st != 200 || one.RunID != older[0] || one.Code == "" {
		t.Errorf("GET /api/runs/%s: %d %+v", older[0], st, one)
	}
	for q, want := range map[string]int{"limit=0": 400, "since=yesterday": 400, "before=nope": 400} {
		if st := e.call("GET", "/api/runs?"+q, nil, nil); st != want {
			t.Errorf("?%s: %d, want %d", q, st, want)
		}
	}

	// A user token: its chats' runs only, whatever it asks for.
	if _, chats := e.runLog(u.Token, url.Values{"q": {"aardvark"}}); !slices.Equal(chats, []string{"ursula-chat"}) {
		t.Errorf("the user's search found runs of %v", chats)
	}
	if ids, _ := e.runLog(u.Token, url.Values{"chat": {"chat-two"}}); len(ids) != 0 {
		t.Errorf("the user found %v in another's chat", ids)
	}
	for path, want := range map[string]int{"/api/runs/" + older[0]: http.StatusNotFound, "/api/stats": http.StatusForbidden} {
		if st := e.callToken(u.Token, "GET", path, nil, nil); st != want {
			t.Errorf("user GET %s: %d, want %d", path, st, want)
		}
	}

	var st struct {
		Bucket string `json:"bucket"`
		Series []struct {
			Start time.Time `json:"start"`
			chat.Counts
		} `json:"series"`
		Totals  chat.Counts         `json:"totals"`
		Chats   []chat.ChatCounts   `json:"chats"`
		Methods []chat.MethodCounts `json:"methods"`
		Plugins []struct {
			Plugin string `json:"plugin"`
			Calls  int    `json:"calls"`
		} `json:"plugins"`
	}
	if code := e.call("GET", "/api/stats?bucket=hour&since=2h", nil, &st); code != 200 {
		t.Fatalf("stats: %d", code)
	}
	tot := st.Totals
	if st.Bucket != "hour" || len(st.Series) < 2 || tot.Turns != 2 || tot.Runs != 3 || tot.RunErrors != 1 ||
		tot.ModelRequests < 2 || tot.Calls != 2 {
		t.Errorf("stats: %+v", st)
	}
	if len(st.Chats) != 3 || len(st.Methods) != 1 || st.Methods[0].Method != "send_msg_text" || st.Methods[0].Calls != 2 ||
		len(st.Plugins) != 1 || st.Plugins[0].Plugin != "nekro.basic" {
		t.Errorf("rankings: chats %+v, methods %+v, plugins %+v", st.Chats, st.Methods, st.Plugins)
	}
	if code := e.call("GET", "/api/stats?bucket=day", nil, &st); code != 200 || st.Bucket != "day" || st.Totals.Runs != 3 {
		t.Errorf("stats by day: %d %+v", code, st.Totals)
	}
	if code := e.call("GET", "/api/stats?bucket=week", nil, nil); code != 400 {
		t.Errorf("bucket=week: %d", code)
	}
}
