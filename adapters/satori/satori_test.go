package satori_test

// A Satori server simulator, written from the public Satori protocol
// documentation (Protocol: Overview, Events, API; Resources: Message,
// Login, Channel; Message Encoding; Standard Elements), talks to the real
// `nekro serve` binary with a scripted model. It shares no code with the
// adapter: its own tiny reading of the element markup stands in for the
// platform on the other side.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

const (
	simToken  = "sim-satori-token-do-not-log"
	discordID = "bot-discord-1"
	qqID      = "BOTQQ0001"
	aliceID   = "alice-7"
	dmChannel = "dm-alice"
	guildChan = "chan-7"
)

// Opcodes, as the Events page lists them.
const (
	opEvent    = 0
	opPing     = 1
	opPong     = 2
	opIdentify = 3
	opReady    = 4
)

// created is a message.create call the simulator accepted.
type created struct {
	Platform, SelfID, Channel, Content, ID string
}

// sim is a Satori SDK: the HTTP API under /v1, the event stream at
// /v1/events, and a file server at /files.
type sim struct {
	t      *testing.T
	srv    *httptest.Server
	images map[string][]byte

	mu         sync.Mutex
	conn       *websocket.Conn // the identified connection, nil when none
	sn         int64
	history    []histEvent // every event, for the resumption IDENTIFY's sn asks
	identifies []map[string]any
	readies    int
	pings      int
	creates    []created
}

type histEvent struct {
	sn int64
	b  []byte
}

// logins is what READY names: one bot on Discord, one on QQ.
func logins() []any {
	return []any{
		map[string]any{"sn": 1, "platform": "discord", "adapter": "discord", "status": 1, "features": []any{},
			"user": map[string]any{"id": discordID, "name": "Nekko", "is_bot": true}},
		map[string]any{"sn": 2, "platform": "qq", "adapter": "qq", "status": 1, "features": []any{},
			"user": map[string]any{"id": qqID, "name": "nekko-qq", "is_bot": true}},
	}
}

func newSim(t *testing.T) *sim {
	s := &sim{t: t, images: map[string][]byte{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/events", s.events)
	mux.HandleFunc("POST /v1/message.create", s.messageCreate)
	mux.HandleFunc("POST /v1/login.get", func(w http.ResponseWriter, r *http.Request) {
		if l := s.authorized(w, r); l != nil {
			writeJSON(w, 200, l)
		}
	})
	mux.HandleFunc("GET /files/", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		b, ok := s.images[r.URL.Path]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		w.Write(b)
	})
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// authorized checks the API's headers: Authorization: Bearer <token>
// (401 when it is missing or wrong) and Satori-Platform with
// Satori-User-ID naming a login (403 otherwise). It returns the login.
func (s *sim) authorized(w http.ResponseWriter, r *http.Request) map[string]any {
	if r.Header.Get("Authorization") != "Bearer "+simToken {
		http.Error(w, "invalid token", http.StatusUnauthorized)
		return nil
	}
	for _, l := range logins() {
		l := l.(map[string]any)
		if l["platform"] == r.Header.Get("Satori-Platform") && l["user"].(map[string]any)["id"] == r.Header.Get("Satori-User-ID") {
			return l
		}
	}
	http.Error(w, "login not found", http.StatusForbidden)
	return nil
}

// messageCreate is POST /v1/message.create {channel_id, content}; it
// answers an array of the Messages created.
func (s *sim) messageCreate(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "want application/json", http.StatusBadRequest)
		return
	}
	if s.authorized(w, r) == nil {
		return
	}
	var body struct {
		ChannelID string `json:"channel_id"`
		Content   string `json:"content"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.ChannelID == "" || body.Content == "" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	c := created{Platform: r.Header.Get("Satori-Platform"), SelfID: r.Header.Get("Satori-User-ID"), Channel: body.ChannelID,
		Content: body.Content, ID: fmt.Sprintf("out-%d", len(s.creates)+1)}
	s.creates = append(s.creates, c)
	s.mu.Unlock()
	writeJSON(w, 200, []any{map[string]any{"id": c.ID, "content": c.Content}})
}

// events is one connection of the event stream: IDENTIFY within 10 s,
// READY with the logins and the events after the sn given, PING/PONG.
func (s *sim) events(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ctx := r.Context()
	defer func() {
		s.mu.Lock()
		if s.conn == ws {
			s.conn = nil
		}
		s.mu.Unlock()
	}()
	identified := false
	for {
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if !identified {
			rctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		}
		_, b, err := ws.Read(rctx)
		cancel()
		if err != nil {
			return
		}
		var p struct {
			Op   int             `json:"op"`
			Body json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(b, &p); err != nil {
			ws.Close(4000, "invalid message")
			return
		}
		switch p.Op {
		case opPing:
			s.mu.Lock()
			s.pings++
			s.mu.Unlock()
			ws.Write(ctx, websocket.MessageText, []byte(`{"op":2,"body":{}}`))
		case opIdentify:
			var id map[string]any
			json.Unmarshal(p.Body, &id)
			s.mu.Lock()
			s.identifies = append(s.identifies, id)
			s.mu.Unlock()
			if id["token"] != simToken {
				ws.Close(4004, "invalid token")
				return
			}
			identified = true
			ready, _ := json.Marshal(map[string]any{"op": opReady, "body": map[string]any{"logins": logins(), "proxy_urls": []any{}}})
			ws.Write(ctx, websocket.MessageText, ready)
			after, _ := id["sn"].(float64)
			s.mu.Lock()
			s.readies++
			var replay [][]byte
			for _, e := range s.history {
				if id["sn"] != nil && e.sn > int64(after) {
					replay = append(replay, e.b)
				}
			}
			s.conn = ws
			s.mu.Unlock()
			for _, b := range replay {
				ws.Write(ctx, websocket.MessageText, b)
			}
		default:
			if !identified {
				ws.Close(4000, "identify first")
				return
			}
		}
	}
}

// dispatch sends a message-created event on the live connection; with
// none (live false), it waits in the history for a resumption.
func (s *sim) dispatch(platform, channel string, private bool, content string) {
	s.dispatchTo(platform, channel, private, content, true)
}

func (s *sim) dispatchTo(platform, channel string, private bool, content string, live bool) {
	self, login := discordID, 1
	if platform == "qq" {
		self, login = qqID, 2
	}
	chType := 0
	if private {
		chType = 1
	}
	s.mu.Lock()
	s.sn++
	body := map[string]any{"sn": s.sn, "type": "message-created", "timestamp": time.Now().UnixMilli(),
		"login":   map[string]any{"sn": login, "platform": platform, "user": map[string]any{"id": self}},
		"channel": map[string]any{"id": channel, "type": chType},
		"user":    map[string]any{"id": aliceID, "name": "alice", "nick": "Alice"},
		"message": map[string]any{"id": fmt.Sprintf("in-%d", s.sn), "content": content, "created_at": time.Now().UnixMilli()}}
	if !private {
		body["guild"] = map[string]any{"id": "guild-1", "name": "Tea Room"}
		body["member"] = map[string]any{"nick": "Ally"}
	}
	b, _ := json.Marshal(map[string]any{"op": opEvent, "body": body})
	s.history = append(s.history, histEvent{sn: s.sn, b: b})
	c := s.conn
	s.mu.Unlock()
	if live && c != nil {
		c.Write(context.Background(), websocket.MessageText, b)
	}
}

// drop closes the live connection without a close frame, as a network
// failure would.
func (s *sim) drop() {
	s.mu.Lock()
	c := s.conn
	s.conn = nil
	s.mu.Unlock()
	if c != nil {
		c.CloseNow()
	}
}

func (s *sim) count(f func() int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return f()
}

// summary lists the messages created so far, for a failure's report.
func (s *sim) summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, c := range s.creates {
		fmt.Fprintf(&b, "created on %s as %s in %s: %.80q\n", c.Platform, c.SelfID, c.Channel, c.Content)
	}
	return b.String()
}

// waitFor polls cond until it holds, for up to two minutes.
func waitFor(t *testing.T, what string, logs func() string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited two minutes for %s\n%s", what, logs())
		}
	}
}

// next waits for a message.create after the first n and returns it.
func (s *sim) next(t *testing.T, n *int, logs func() string) created {
	t.Helper()
	var c created
	waitFor(t, fmt.Sprintf("message.create #%d", *n+1), logs, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.creates) > *n {
			c = s.creates[*n]
			return true
		}
		return false
	})
	*n++
	return c
}

// The simulator's own reading of content: resource elements with a
// data: URL, and the text between them unescaped.
var (
	resourceRE = regexp.MustCompile(`<(img|file) src="data:([^;",]+)(?:;[^;",]+)*;base64,([A-Za-z0-9+/=]+)"(?: title="([^"]*)")?/>`)
	entityRE   = regexp.MustCompile(`&(amp|lt|gt|quot);`)
)

type resourceOut struct {
	Kind, MIME, Title string
	Data              []byte
}

func decodeContent(t *testing.T, content string) (string, []resourceOut) {
	var files []resourceOut
	for _, m := range resourceRE.FindAllStringSubmatch(content, -1) {
		b, err := base64.StdEncoding.DecodeString(m[3])
		if err != nil {
			t.Fatalf("a resource whose base64 does not decode: %v", err)
		}
		files = append(files, resourceOut{Kind: m[1], MIME: m[2], Title: m[4], Data: b})
	}
	text := resourceRE.ReplaceAllString(content, "")
	if strings.ContainsAny(text, "<>") {
		t.Fatalf("content with markup besides resources: %q", content)
	}
	text = entityRE.ReplaceAllStringFunc(text, func(e string) string {
		return map[string]string{"&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": `"`}[e]
	})
	return text, files
}

func pngBytes(t *testing.T) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	img.Set(1, 1, color.RGBA{G: 200, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

const csvOut = "day,cups\nmon,3\n"

// shout is what the model writes to test escaping: markup that would
// ping everyone were it sent as elements.
const shout = `hey <at id="all"/> & <at type="all"/> "friends"`

// model answers the latest of the test's requests the prompt holds.
func model(t *testing.T, png []byte) *llmtest.Server {
	replies := map[string]string{
		"send me both files": fmt.Sprintf(`import base64
open("/app/shared/dot.png", "wb").write(base64.b64decode(%q))
open("/app/shared/report.csv", "w").write(%q)
send_msg_file(_ck, "/app/shared/dot.png")
send_msg_file(_ck, "/app/shared/report.csv")`, base64.StdEncoding.EncodeToString(png), csvOut),
		"look at this":  `send_msg_text(_ck, "image bytes %d" % len(open("/app/uploads/cat.png", "rb").read()))`,
		"shout":         fmt.Sprintf(`send_msg_text(_ck, %q)`, shout),
		"are you there": `send_msg_text(_ck, "yes, replying")`,
		"hello there":   `send_msg_text(_ck, "pong group")`,
	}
	for _, w := range []string{"one", "two", "three"} {
		replies["ping "+w] = `send_msg_text(_ck, "pong ` + w + `")`
	}
	m, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		last, code, at := r.Last(), `send_msg_text(_ck, "?")`, -1
		for k, c := range replies {
			if i := strings.LastIndex(last, k); i > at {
				code, at = c, i
			}
		}
		return llmtest.Code(code)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// The bot against the simulated Satori server with two logins (Discord
// and QQ): IDENTIFY carries the token; a private message is answered
// through the right login and channel; a group message without a mention
// is context for a later <at>'s answer; a quote of the bot's message is
// answered; an image comes in and an image and a file go out intact; the
// model's markup is escaped; after the connection drops nekro IDENTIFYs
// with the last sn and the events sent meanwhile arrive; an API user
// cannot take a satori- chat; the status lists the logins.
func TestEventStream(t *testing.T) {
	img := pngBytes(t)
	m := model(t, img)
	s := newSim(t)
	srv := testutil.Serve(t, testutil.DataDir(t), "api-tok", "NEKRO_LLM_BASE_URL="+m.URL, "NEKRO_LLM_MODEL=scripted",
		"NEKRO_SATORI_URL="+s.srv.URL, "NEKRO_SATORI_TOKEN="+simToken, "NEKRO_LOG_LEVEL=info")
	logs := func() string { return s.summary() + srv.Logs.String() } // on failure only
	posts := 0

	waitFor(t, "IDENTIFY and READY", logs, func() bool { return s.count(func() int { return s.readies }) == 1 })
	s.mu.Lock()
	first := s.identifies[0]
	s.mu.Unlock()
	if first["token"] != simToken || (first["sn"] != nil && first["sn"] != float64(0)) {
		t.Fatalf("the first IDENTIFY: %v, want the token and no sn", first)
	}
	waitFor(t, "the status to show both logins", logs, func() bool {
		_, st := srv.API("GET", "/api/status", nil)
		return strings.Contains(st, `"name": "satori:discord"`) && strings.Contains(st, `"self_id": "`+discordID+`"`) &&
			strings.Contains(st, `"name": "satori:qq"`) && strings.Contains(st, `"self_id": "`+qqID+`"`) && strings.Contains(st, `"connected": true`)
	})

	// A private message on QQ: answered through the QQ login, in its
	// channel.
	s.dispatch("qq", dmChannel, true, "ping one")
	c := s.next(t, &posts, logs)
	if c.Platform != "qq" || c.SelfID != qqID || c.Channel != dmChannel || c.Content != "pong one" {
		t.Fatalf("private answer: %+v", c)
	}

	// Group messages on Discord: one unaddressed (kept), then an <at> of
	// the bot: one turn, which reads both.
	s.dispatch("discord", guildChan, false, "just chatting about the weather")
	s.dispatch("discord", guildChan, false, `<at id="`+discordID+`" name="Nekko"/> hello there`)
	c = s.next(t, &posts, logs)
	if c.Platform != "discord" || c.SelfID != discordID || c.Channel != guildChan || c.Content != "pong group" {
		t.Fatalf("group answer: %+v", c)
	}
	chat := "satori-discord-group_" + guildChan
	reqs := m.RequestsFor(chat)
	if len(reqs) != 1 || !reqs[0].Contains("just chatting about the weather") {
		t.Fatalf("the unaddressed message should be in the one turn's prompt: %d requests", len(reqs))
	}
	_, hist := srv.API("GET", "/api/chats/"+chat+"/messages", nil)
	if !strings.Contains(hist, "@Nekko hello there") || !strings.Contains(hist, `"sender_id": "satori:discord:`+aliceID+`"`) {
		t.Fatalf("history:\n%s", hist)
	}

	// A quote of the bot's message, without a mention: answered.
	s.dispatch("discord", guildChan, false, `<quote id="`+c.ID+`"/>are you there`)
	if c = s.next(t, &posts, logs); c.Content != "yes, replying" || c.Channel != guildChan {
		t.Fatalf("reply answer: %+v", c)
	}

	// An image in: fetched from its src into the chat's uploads, where
	// the model's code reads it.
	s.mu.Lock()
	s.images["/files/cat.png"] = img
	s.mu.Unlock()
	s.dispatch("qq", dmChannel, true, `look at this<img src="`+s.srv.URL+`/files/cat.png" title="cat.png"/>`)
	if c = s.next(t, &posts, logs); c.Content != fmt.Sprintf("image bytes %d", len(img)) {
		t.Fatalf("image in: %+v", c)
	}

	// An image and a CSV out: resource elements with data: URLs, bytes
	// intact.
	s.dispatch("qq", dmChannel, true, "send me both files")
	got := map[string]resourceOut{}
	for len(got) < 2 {
		c = s.next(t, &posts, logs)
		_, files := decodeContent(t, c.Content)
		if len(files) == 0 {
			t.Fatalf("a message without the files: %+v", c)
		}
		for _, f := range files {
			got[f.Title] = f
		}
	}
	if f := got["dot.png"]; f.Kind != "img" || f.MIME != "image/png" || !bytes.Equal(f.Data, img) {
		t.Fatalf("image out: <%s> %s, %d bytes, want %d", f.Kind, f.MIME, len(f.Data), len(img))
	}
	if f := got["report.csv"]; f.Kind != "file" || string(f.Data) != csvOut {
		t.Fatalf("file out: <%s> %q", f.Kind, f.Data)
	}

	// The model's markup is escaped: it reads back as the same text, with
	// no element in it.
	s.dispatch("discord", dmChannel, true, "shout")
	c = s.next(t, &posts, logs)
	if text, files := decodeContent(t, c.Content); text != shout || len(files) != 0 || strings.Contains(c.Content, "<at") {
		t.Fatalf("shout sent as %q, read back as %q", c.Content, text)
	}

	// An API user cannot create or join a Satori chat.
	st, body := srv.API("POST", "/api/users", map[string]string{"user_id": "mallory"})
	var u struct{ Token string }
	if json.Unmarshal([]byte(body), &u); st != http.StatusCreated || u.Token == "" {
		t.Fatalf("add user: %d %s", st, body)
	}
	for _, key := range []string{"satori-qq-private_" + dmChannel, "satori-discord-group_999", "satori-anything"} {
		if st, body := srv.Call("POST", "/api/chats/"+key+"/messages", u.Token, map[string]string{"text": "first!"}); st != http.StatusForbidden || !strings.Contains(body, "satori adapter") {
			t.Errorf("user posting to %s: %d %s, want 403 naming the adapter", key, st, body)
		}
	}

	// The connection drops with an event not yet delivered: nekro
	// IDENTIFYs again with the last sn it read, and the event arrives.
	s.mu.Lock()
	lastSN := s.sn
	s.mu.Unlock()
	s.dispatchTo("qq", dmChannel, true, "ping two", false)
	s.drop()
	c = s.next(t, &posts, logs)
	s.mu.Lock()
	ids := append([]map[string]any(nil), s.identifies...)
	s.mu.Unlock()
	if c.Content != "pong two" || len(ids) != 2 {
		t.Fatalf("after the drop: %q, %d IDENTIFYs", c.Content, len(ids))
	}
	if id := ids[1]; id["sn"] != float64(lastSN) || id["token"] != simToken {
		t.Fatalf("the resuming IDENTIFY: %v, want sn %d and the token", id, lastSN)
	}
	s.dispatch("discord", guildChan, false, `<at id="`+discordID+`"/> ping three`)
	if c = s.next(t, &posts, logs); c.Content != "pong three" {
		t.Fatalf("after the resumption: %+v", c)
	}

	waitFor(t, "a PING (one every 10 s)", logs, func() bool { return s.count(func() int { return s.pings }) > 0 })

	srv.Stop()
	out := srv.Logs.String()
	for _, want := range []string{"Satori event stream connected", "Satori event stream dropped", "Satori event stream closed"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, simToken) {
		t.Errorf("the token is in the log:\n%s", out)
	}
}

// nekro doctor does the event stream's handshake and asks the API for
// each login; a wrong token or path is named with its fix.
func TestDoctor(t *testing.T) {
	s := newSim(t)
	t.Setenv("NEKRO_SATORI_URL", s.srv.URL)
	t.Setenv("NEKRO_SATORI_TOKEN", simToken)
	r := testutil.RunNekro(t, nil, "doctor", "--data", testutil.DataDir(t))
	if !strings.Contains(r.Stdout, "ok   satori: the Satori server") || !strings.Contains(r.Stdout, "discord:"+discordID) ||
		!strings.Contains(r.Stdout, "ok   satori: HTTP API answers for qq:"+qqID) {
		t.Fatalf("doctor with the right token:\n%s\n%s", r.Stdout, r.Stderr)
	}
	t.Setenv("NEKRO_SATORI_TOKEN", "wrong-token")
	r = testutil.RunNekro(t, nil, "doctor", "--data", testutil.DataDir(t))
	if !strings.Contains(r.Stdout, "warn satori: ") || !strings.Contains(r.Stdout, "close code 4004") || !strings.Contains(r.Stdout, "--satori-token") {
		t.Fatalf("doctor with a wrong token:\n%s\n%s", r.Stdout, r.Stderr)
	}
	t.Setenv("NEKRO_SATORI_URL", s.srv.URL+"/koishi")
	r = testutil.RunNekro(t, nil, "doctor", "--data", testutil.DataDir(t))
	if !strings.Contains(r.Stdout, "warn satori: no event stream at ws://") || !strings.Contains(r.Stdout, "--satori-url") {
		t.Fatalf("doctor with a wrong path:\n%s\n%s", r.Stdout, r.Stderr)
	}
}

// A wrong token, refused at IDENTIFY (close code 4004), is reported
// clearly, in the status and once in the log, and not retried in a loop.
func TestRefusedToken(t *testing.T) {
	s := newSim(t)
	srv := testutil.Serve(t, testutil.DataDir(t), "api-tok", "NEKRO_LLM_BASE_URL=http://127.0.0.1:1/v1", "NEKRO_LLM_MODEL=scripted",
		"NEKRO_SATORI_URL="+s.srv.URL, "NEKRO_SATORI_TOKEN=wrong-token-value")
	logs := func() string { return srv.Logs.String() } // on failure only
	waitFor(t, "the refusal in the status", logs, func() bool {
		_, st := srv.API("GET", "/api/status", nil)
		return strings.Contains(st, "close code 4004") && strings.Contains(st, "--satori-token") && strings.Contains(st, `"connected": false`)
	})
	attempts := func() int { return len(s.identifies) }
	first := s.count(attempts)
	time.Sleep(6 * time.Second) // count the attempts over a few seconds
	if n := s.count(attempts); n > 2 || n-first > 1 {
		t.Fatalf("%d IDENTIFYs within 6 s of the refusal: a tight loop", n)
	}
	srv.Stop()
	out := srv.Logs.String()
	if n := strings.Count(out, "the Satori server refused nekro"); n != 1 || !strings.Contains(out, "level=ERROR") {
		t.Errorf("the refusal should be logged once as an error (%d times):\n%s", n, out)
	}
	if strings.Contains(out, "wrong-token-value") {
		t.Errorf("the token is in the log:\n%s", out)
	}
}
