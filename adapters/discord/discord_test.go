package discord_test

// A Discord simulator, written from the public Discord developer
// documentation (Topics: Gateway, Opcodes and Status Codes, Rate Limits;
// Resources: Message (Create Message, uploading files), User, Gateway
// Get Gateway Bot), talks to the real `nekro serve` binary with a
// scripted model. It shares no code with the adapter.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

const (
	botID      = "100000000000000001"
	aliceID    = "200000000000000002"
	dmChannel  = "300000000000000003"
	guildID    = "400000000000000004"
	guildChan  = "500000000000000005"
	otherBotID = "600000000000000006"
	simToken   = "sim-bot-token-do-not-log"
	// The intents the adapter needs: GUILD_MESSAGES, DIRECT_MESSAGES,
	// MESSAGE_CONTENT.
	wantIntents = 1<<9 | 1<<12 | 1<<15
)

// post is a Create Message request the simulator accepted.
type post struct {
	Channel         string
	Content         string
	AllowedMentions json.RawMessage
	Files           []postFile
	At              time.Time
}

type postFile struct {
	Name, ContentType string
	Data              []byte
}

type frame struct {
	seq int64
	b   []byte
}

// sim is Discord: the REST API under /api/v10, attachments under
// /attachments, and the Gateway at /gateway (and /resume, the
// resume_gateway_url READY names).
type sim struct {
	t        *testing.T
	srv      *httptest.Server
	interval int64 // heartbeat_interval sent in HELLO, ms
	images   map[string][]byte

	mu          sync.Mutex
	refuse      bool            // close every IDENTIFY with 4004, as for a wrong token
	conn        *websocket.Conn // the identified or resumed connection, nil when none
	sessionID   string
	seq         int64
	history     []frame // this session's dispatches, for RESUME
	noACK       bool
	limitPosts  int // answer that many Create Message calls with a 429
	gatewayBots []time.Time
	identifies  int
	resumes     []map[string]any
	connects    int // READY and RESUMED sent
	heartbeats  int
	posts       []post
	limited     []time.Time
	postTries   int
}

func newSim(t *testing.T) *sim {
	s := &sim{t: t, interval: 2500, images: map[string][]byte{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v10/gateway/bot", s.gatewayBot)
	mux.HandleFunc("GET /api/v10/users/@me", func(w http.ResponseWriter, r *http.Request) {
		if s.authorized(w, r) {
			writeJSON(w, 200, botUser())
		}
	})
	mux.HandleFunc("POST /api/v10/channels/{id}/messages", s.createMessage)
	mux.HandleFunc("GET /attachments/", func(w http.ResponseWriter, r *http.Request) {
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
	mux.HandleFunc("GET /gateway", s.gateway)
	mux.HandleFunc("GET /resume", s.gateway)
	s.srv = httptest.NewUnstartedServer(mux) // started once s.srv is set: handlers read its URL
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sim) apiURL() string { return s.srv.URL + "/api/v10" }
func (s *sim) wsBase() string { return "ws" + strings.TrimPrefix(s.srv.URL, "http") }

func botUser() map[string]any {
	return map[string]any{"id": botID, "username": "nekko", "global_name": "Nekko", "discriminator": "0", "bot": true}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// authorized checks "Authorization: Bot <token>" and the User-Agent
// form bots must send, answering 401 as Discord does.
func (s *sim) authorized(w http.ResponseWriter, r *http.Request) bool {
	if !strings.HasPrefix(r.Header.Get("User-Agent"), "DiscordBot (") {
		s.t.Errorf("%s %s: User-Agent %q, want DiscordBot (url, version)", r.Method, r.URL.Path, r.Header.Get("User-Agent"))
	}
	if r.Header.Get("Authorization") != "Bot "+simToken {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "401: Unauthorized", "code": 0})
		return false
	}
	return true
}

func (s *sim) gatewayBot(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.gatewayBots = append(s.gatewayBots, time.Now())
	s.mu.Unlock()
	if !s.authorized(w, r) {
		return
	}
	writeJSON(w, 200, map[string]any{"url": s.wsBase() + "/gateway", "shards": 1,
		"session_start_limit": map[string]any{"total": 1000, "remaining": 990, "reset_after": 3600000, "max_concurrency": 1}})
}

// createMessage is POST /channels/{channel.id}/messages: a JSON body, or
// multipart/form-data with payload_json and files[n] parts.
func (s *sim) createMessage(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	s.mu.Lock()
	s.postTries++
	limit := s.limitPosts > 0
	if limit {
		s.limitPosts--
		s.limited = append(s.limited, time.Now())
	}
	s.mu.Unlock()
	if limit {
		w.Header().Set("Retry-After", "2")
		w.Header().Set("X-RateLimit-Limit", "5")
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset-After", "1.5")
		w.Header().Set("X-RateLimit-Bucket", "abcd1234")
		w.Header().Set("X-RateLimit-Scope", "user")
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"message": "You are being rate limited.", "retry_after": 1.5, "global": false})
		return
	}
	var body struct {
		Content         string          `json:"content"`
		AllowedMentions json.RawMessage `json:"allowed_mentions"`
		Attachments     []struct {
			ID       json.Number `json:"id"`
			Filename string      `json:"filename"`
		} `json:"attachments"`
	}
	p := post{Channel: r.PathValue("id"), At: time.Now()}
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			writeJSON(w, 400, map[string]any{"message": "Invalid Form Body", "code": 50035})
			return
		}
	case "multipart/form-data":
		mr := multipart.NewReader(r.Body, params["boundary"])
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				writeJSON(w, 400, map[string]any{"message": "Invalid Form Body", "code": 50035})
				return
			}
			b, _ := io.ReadAll(part)
			switch name := part.FormName(); {
			case name == "payload_json":
				if err := json.Unmarshal(b, &body); err != nil {
					writeJSON(w, 400, map[string]any{"message": "Invalid Form Body", "code": 50035})
					return
				}
			case strings.HasPrefix(name, "files["):
				p.Files = append(p.Files, postFile{Name: part.FileName(), ContentType: part.Header.Get("Content-Type"), Data: b})
			default:
				s.t.Errorf("Create Message: unexpected form field %q", name)
			}
		}
		if len(body.Attachments) != len(p.Files) {
			s.t.Errorf("Create Message: %d attachments described for %d files", len(body.Attachments), len(p.Files))
		}
	default:
		writeJSON(w, 400, map[string]any{"message": "Content-Type must be JSON or multipart", "code": 50035})
		return
	}
	if utf8.RuneCountInString(body.Content) > 2000 {
		writeJSON(w, 400, map[string]any{"message": "Invalid Form Body: content: Must be 2000 or fewer in length.", "code": 50035})
		return
	}
	if strings.TrimSpace(body.Content) == "" && len(p.Files) == 0 {
		writeJSON(w, 400, map[string]any{"message": "Cannot send an empty message", "code": 50006})
		return
	}
	p.Content, p.AllowedMentions = body.Content, body.AllowedMentions
	s.mu.Lock()
	s.posts = append(s.posts, p)
	n := len(s.posts)
	s.mu.Unlock()
	w.Header().Set("X-RateLimit-Limit", "5")
	w.Header().Set("X-RateLimit-Remaining", "4")
	w.Header().Set("X-RateLimit-Reset-After", "0.2")
	writeJSON(w, 200, map[string]any{"id": fmt.Sprint(900000000000000000 + n), "channel_id": p.Channel, "content": p.Content,
		"author": botUser(), "attachments": []any{}, "type": 0})
}

// gateway is one Gateway connection: HELLO, then heartbeats, IDENTIFY or
// RESUME, and dispatches.
func (s *sim) gateway(w http.ResponseWriter, r *http.Request) {
	if q := r.URL.Query(); q.Get("v") != "10" || q.Get("encoding") != "json" {
		s.t.Errorf("gateway dialed as %s, want ?v=10&encoding=json", r.URL)
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ctx := r.Context()
	send := func(v any) error {
		b, _ := json.Marshal(v)
		return ws.Write(ctx, websocket.MessageText, b)
	}
	send(map[string]any{"op": 10, "d": map[string]any{"heartbeat_interval": s.interval}})
	defer func() {
		s.mu.Lock()
		if s.conn == ws {
			s.conn = nil
		}
		s.mu.Unlock()
	}()
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			return
		}
		var p struct {
			Op int             `json:"op"`
			D  json.RawMessage `json:"d"`
		}
		if err := json.Unmarshal(b, &p); err != nil {
			ws.Close(4002, "Decode error")
			return
		}
		switch p.Op {
		case 1:
			s.mu.Lock()
			s.heartbeats++
			ack := !s.noACK
			s.mu.Unlock()
			if ack {
				send(map[string]any{"op": 11})
			}
		case 2:
			var id struct {
				Token   string `json:"token"`
				Intents int    `json:"intents"`
			}
			json.Unmarshal(p.D, &id)
			s.mu.Lock()
			s.identifies++
			refuse := s.refuse
			s.mu.Unlock()
			if refuse || id.Token != simToken {
				ws.Close(4004, "Authentication failed.")
				return
			}
			if id.Intents&wantIntents != wantIntents {
				s.t.Errorf("IDENTIFY intents %b lack %b", id.Intents, wantIntents)
			}
			s.mu.Lock()
			s.sessionID = fmt.Sprintf("session-%d", s.identifies)
			s.seq, s.history, s.conn = 0, nil, ws
			sid := s.sessionID
			s.mu.Unlock()
			s.dispatch("READY", map[string]any{"v": 10, "user": botUser(), "guilds": []any{map[string]any{"id": guildID, "unavailable": true}},
				"session_id": sid, "resume_gateway_url": s.wsBase() + "/resume", "application": map[string]any{"id": botID}})
		case 6:
			var rs struct {
				Token     string `json:"token"`
				SessionID string `json:"session_id"`
				Seq       int64  `json:"seq"`
			}
			json.Unmarshal(p.D, &rs)
			var m map[string]any
			json.Unmarshal(p.D, &m)
			s.mu.Lock()
			s.resumes = append(s.resumes, m)
			ok := rs.SessionID == s.sessionID && rs.Token == simToken && r.URL.Path == "/resume"
			var replay [][]byte
			if ok {
				s.conn = ws
				for _, f := range s.history {
					if f.seq > rs.Seq {
						replay = append(replay, f.b)
					}
				}
			}
			s.mu.Unlock()
			if !ok {
				send(map[string]any{"op": 9, "d": false})
				continue
			}
			for _, b := range replay {
				ws.Write(ctx, websocket.MessageText, b)
			}
			s.dispatch("RESUMED", nil)
		default:
			ws.Close(4001, "Unknown opcode.")
			return
		}
	}
}

// dispatch sends an event (op 0) on the live connection; with none, the
// event waits in the session's history for a RESUME.
func (s *sim) dispatch(t string, d any) { s.dispatchTo(t, d, true) }

func (s *sim) dispatchTo(t string, d any, live bool) {
	s.mu.Lock()
	s.seq++
	b, _ := json.Marshal(map[string]any{"op": 0, "s": s.seq, "t": t, "d": d})
	s.history = append(s.history, frame{seq: s.seq, b: b})
	c := s.conn
	if t == "READY" || t == "RESUMED" {
		s.connects++
	}
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

// message is a MESSAGE_CREATE's message object; guild "" for a DM.
func message(channel, guild string, author map[string]any, content string) map[string]any {
	m := map[string]any{"id": fmt.Sprint(time.Now().UnixNano()), "type": 0, "channel_id": channel, "author": author,
		"content": content, "timestamp": time.Now().UTC().Format(time.RFC3339), "tts": false, "mention_everyone": false,
		"mentions": []any{}, "mention_roles": []any{}, "attachments": []any{}, "embeds": []any{}, "pinned": false}
	if guild != "" {
		m["guild_id"] = guild
		m["member"] = map[string]any{"nick": "Ally", "roles": []any{}}
	}
	return m
}

func alice() map[string]any {
	return map[string]any{"id": aliceID, "username": "alice", "global_name": "Alice", "discriminator": "0"}
}

// waitFor polls cond until it holds, for up to a minute.
func waitFor(t *testing.T, what string, logs func() string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s\n%s", what, logs())
		}
	}
}

// nextPost waits for a Create Message after the first n and returns it.
func (s *sim) nextPost(t *testing.T, n *int, logs func() string) post {
	t.Helper()
	var p post
	waitFor(t, fmt.Sprintf("Create Message #%d", *n+1), logs, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.posts) > *n {
			p = s.posts[*n]
			return true
		}
		return false
	})
	*n++
	return p
}

// summary lists the messages created so far, for a failure's report.
func (s *sim) summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, p := range s.posts {
		fmt.Fprintf(&b, "created in %s: %.60q, %d files\n", p.Channel, p.Content, len(p.Files))
	}
	return b.String()
}

func (s *sim) count(f func() int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return f()
}

func pngBytes(t *testing.T) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	img.Set(1, 1, color.RGBA{R: 200, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

const csvOut = "day,cups\nmon,3\n"

// model answers the latest of the test's requests the prompt holds (the
// prompt's last message carries the recent history, oldest first).
func model(t *testing.T, png []byte) *llmtest.Server {
	replies := map[string]string{
		"send me both files": fmt.Sprintf(`import base64
open("/app/shared/dot.png", "wb").write(base64.b64decode(%q))
open("/app/shared/report.csv", "w").write(%q)
send_msg_file(_ck, "/app/shared/dot.png")
send_msg_file(_ck, "/app/shared/report.csv")`, base64.StdEncoding.EncodeToString(png), csvOut),
		"look at this":         `send_msg_text(_ck, "image bytes %d" % len(open("/app/uploads/cat.png", "rb").read()))`,
		"tell me a long story": `send_msg_text(_ck, "word " * 900 + "END")`,
		"shout":                `send_msg_text(_ck, "hey @everyone and <@` + aliceID + `>")`,
		"are you there":        `send_msg_text(_ck, "yes, replying")`,
		"hello there":          `send_msg_text(_ck, "pong group")`,
	}
	for _, w := range []string{"one", "two", "three", "four", "five"} {
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

// The bot against the simulated Discord: a DM is answered; a guild
// message without a mention is context for a later mention's answer; a
// reply to the bot is answered; an image comes in and an image and a
// CSV go out intact; long texts are split; nothing sent can ping; a 429
// is waited out; after the connection drops the session is resumed and
// the events sent meanwhile are replayed; a missed heartbeat ACK and an
// invalid session reconnect; an API user cannot take a discord- chat.
func TestGateway(t *testing.T) {
	img := pngBytes(t)
	m := model(t, img)
	s := newSim(t)
	srv := testutil.Serve(t, testutil.DataDir(t), "api-tok", "NEKRO_LLM_BASE_URL="+m.URL, "NEKRO_LLM_MODEL=scripted",
		"NEKRO_DISCORD_TOKEN="+simToken, "NEKRO_DISCORD_API_URL="+s.apiURL(), "NEKRO_DISCORD_BOT_NAMES=Nekko", "NEKRO_LOG_LEVEL=info")
	logs := func() string { return s.summary() + srv.Logs.String() } // on failure only
	posts := 0

	waitFor(t, "READY", logs, func() bool { return s.count(func() int { return s.connects }) == 1 })
	waitFor(t, "the status to show the connection", logs, func() bool {
		_, st := srv.API("GET", "/api/status", nil)
		return strings.Contains(st, `"name": "discord"`) && strings.Contains(st, `"connected": true`) && strings.Contains(st, `"self_id": "`+botID+`"`)
	})

	// A DM: answered in the DM channel, with no mention allowed.
	s.dispatch("MESSAGE_CREATE", message(dmChannel, "", alice(), "ping one"))
	p := s.nextPost(t, &posts, logs)
	if p.Channel != dmChannel || p.Content != "pong one" {
		t.Fatalf("DM answer: %+v", p)
	}

	// Guild messages: not addressed (kept), another bot's mention (kept,
	// never answered), then a mention: one turn, which reads both.
	s.dispatch("MESSAGE_CREATE", message(guildChan, guildID, alice(), "just chatting about the weather"))
	s.dispatch("MESSAGE_CREATE", message(guildChan, guildID,
		map[string]any{"id": otherBotID, "username": "otherbot", "bot": true}, "<@"+botID+"> bots talking about tea"))
	mention := message(guildChan, guildID, alice(), "<@!"+botID+"> hello there")
	mention["mentions"] = []any{botUser()}
	s.dispatch("MESSAGE_CREATE", mention)
	p = s.nextPost(t, &posts, logs)
	if p.Channel != guildChan || p.Content != "pong group" {
		t.Fatalf("guild answer: %+v", p)
	}
	chat := "discord-group_" + guildChan
	reqs := m.RequestsFor(chat)
	if len(reqs) != 1 || !reqs[0].Contains("just chatting about the weather") || !reqs[0].Contains("bots talking about tea") {
		t.Fatalf("the unaddressed messages should be in the one turn's prompt: %d requests", len(reqs))
	}
	_, hist := srv.API("GET", "/api/chats/"+chat+"/messages", nil)
	if !strings.Contains(hist, "@Nekko hello there") || !strings.Contains(hist, `"sender_id": "discord:`+aliceID+`"`) {
		t.Fatalf("history:\n%s", hist)
	}

	// A reply to the bot's message, without a mention: answered.
	reply := message(guildChan, guildID, alice(), "are you there")
	reply["type"] = 19
	reply["message_reference"] = map[string]any{"message_id": "900000000000000001", "channel_id": guildChan, "guild_id": guildID}
	reply["referenced_message"] = map[string]any{"id": "900000000000000001", "channel_id": guildChan, "author": botUser(), "content": "pong group", "type": 0}
	s.dispatch("MESSAGE_CREATE", reply)
	if p = s.nextPost(t, &posts, logs); p.Content != "yes, replying" {
		t.Fatalf("reply answer: %+v", p)
	}

	// An image in: fetched from the attachment URL into the chat's
	// uploads, where the model's code reads it.
	s.mu.Lock()
	s.images["/attachments/"+dmChannel+"/700/cat.png"] = img
	s.mu.Unlock()
	withImage := message(dmChannel, "", alice(), "look at this")
	withImage["attachments"] = []any{map[string]any{"id": "700", "filename": "cat.png", "size": len(img), "content_type": "image/png",
		"url": s.srv.URL + "/attachments/" + dmChannel + "/700/cat.png?ex=65&is=66&hm=ab", "proxy_url": s.srv.URL + "/attachments/" + dmChannel + "/700/cat.png"}}
	s.dispatch("MESSAGE_CREATE", withImage)
	if p = s.nextPost(t, &posts, logs); p.Content != fmt.Sprintf("image bytes %d", len(img)) {
		t.Fatalf("image in: %+v", p)
	}

	// An image and a CSV out: multipart files[n], bytes intact.
	s.dispatch("MESSAGE_CREATE", message(dmChannel, "", alice(), "send me both files"))
	got := map[string]postFile{}
	for len(got) < 2 {
		p = s.nextPost(t, &posts, logs)
		for _, f := range p.Files {
			got[f.Name] = f
		}
		if len(p.Files) == 0 {
			t.Fatalf("a message without the files: %+v", p)
		}
	}
	if f := got["dot.png"]; !bytes.Equal(f.Data, img) || f.ContentType != "image/png" {
		t.Fatalf("image out: %q %d bytes, want %d", f.ContentType, len(f.Data), len(img))
	}
	if f := got["report.csv"]; string(f.Data) != csvOut {
		t.Fatalf("file out: %q", f.Data)
	}

	// A long text: split into parts Discord accepts, nothing lost.
	s.dispatch("MESSAGE_CREATE", message(dmChannel, "", alice(), "tell me a long story"))
	var parts []string
	for !strings.HasSuffix(strings.Join(parts, ""), "END") {
		parts = append(parts, s.nextPost(t, &posts, logs).Content)
	}
	if len(parts) != 3 || strings.Join(parts, " ") != strings.Repeat("word ", 900)+"END" {
		t.Fatalf("long text in %d parts: %.80q", len(parts), parts)
	}

	// Nothing the model writes can ping: every message says so.
	s.dispatch("MESSAGE_CREATE", message(dmChannel, "", alice(), "shout"))
	if p = s.nextPost(t, &posts, logs); !strings.Contains(p.Content, "@everyone") {
		t.Fatalf("shout: %+v", p)
	}
	s.mu.Lock()
	all := append([]post(nil), s.posts...)
	s.mu.Unlock()
	for _, p := range all {
		var am struct {
			Parse []string `json:"parse"`
		}
		if err := json.Unmarshal(p.AllowedMentions, &am); err != nil || am.Parse == nil || len(am.Parse) != 0 {
			t.Fatalf("allowed_mentions %s, want parse []", p.AllowedMentions)
		}
	}

	// A 429: the retry comes after retry_after, and only one.
	s.mu.Lock()
	s.limitPosts = 1
	tries := s.postTries
	s.mu.Unlock()
	s.dispatch("MESSAGE_CREATE", message(dmChannel, "", alice(), "ping four"))
	p = s.nextPost(t, &posts, logs)
	s.mu.Lock()
	limitedAt, tries := s.limited[0], s.postTries-tries
	s.mu.Unlock()
	if p.Content != "pong four" || tries != 2 || p.At.Sub(limitedAt) < 1450*time.Millisecond {
		t.Fatalf("after a 429 with retry_after 1.5: %q, %d tries, retried after %s", p.Content, tries, p.At.Sub(limitedAt))
	}

	// An API user cannot create or join a Discord chat.
	st, body := srv.API("POST", "/api/users", map[string]string{"user_id": "mallory"})
	var u struct{ Token string }
	if json.Unmarshal([]byte(body), &u); st != http.StatusCreated || u.Token == "" {
		t.Fatalf("add user: %d %s", st, body)
	}
	for _, key := range []string{"discord-private_" + dmChannel, "discord-group_999", "discord-anything"} {
		if st, body := srv.Call("POST", "/api/chats/"+key+"/messages", u.Token, map[string]string{"text": "first!"}); st != http.StatusForbidden || !strings.Contains(body, "discord adapter") {
			t.Errorf("user posting to %s: %d %s, want 403 naming the adapter", key, st, body)
		}
	}

	// The connection drops with an event not yet delivered: nekro resumes
	// the session at resume_gateway_url with the last sequence it read,
	// and the event is replayed.
	s.mu.Lock()
	lastSeq := s.seq
	s.mu.Unlock()
	s.dispatchTo("MESSAGE_CREATE", message(dmChannel, "", alice(), "ping two"), false)
	s.drop()
	p = s.nextPost(t, &posts, logs)
	s.mu.Lock()
	resumes := append([]map[string]any(nil), s.resumes...)
	identifies := s.identifies
	s.mu.Unlock()
	if p.Content != "pong two" || len(resumes) != 1 || identifies != 1 {
		t.Fatalf("after the drop: %q, %d resumes, %d identifies", p.Content, len(resumes), identifies)
	}
	if r := resumes[0]; r["session_id"] != "session-1" || r["seq"] != float64(lastSeq) || r["token"] != simToken {
		t.Fatalf("RESUME %v, want session-1 and seq %d", r, lastSeq)
	}

	// Heartbeats go unacknowledged: nekro drops the dead connection and
	// resumes.
	s.mu.Lock()
	s.noACK = true
	s.mu.Unlock()
	waitFor(t, "a RESUME after heartbeats went unacknowledged", logs, func() bool { return s.count(func() int { return len(s.resumes) }) >= 2 })
	s.mu.Lock()
	s.noACK = false
	s.mu.Unlock()
	waitFor(t, "RESUMED", logs, func() bool { return s.count(func() int { return s.connects }) >= 3 })
	s.dispatch("MESSAGE_CREATE", message(dmChannel, "", alice(), "ping three"))
	if p = s.nextPost(t, &posts, logs); p.Content != "pong three" {
		t.Fatalf("after the missed ACK: %+v", p)
	}

	// An invalid session, not resumable: a new IDENTIFY after 1-5 s.
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"op": 9, "d": false})
	c.Write(context.Background(), websocket.MessageText, b)
	waitFor(t, "a new IDENTIFY after the invalid session", logs, func() bool { return s.count(func() int { return s.identifies }) >= 2 })
	waitFor(t, "READY", logs, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.conn != nil && s.sessionID == "session-2"
	})
	s.dispatch("MESSAGE_CREATE", message(dmChannel, "", alice(), "ping five"))
	if p = s.nextPost(t, &posts, logs); p.Content != "pong five" {
		t.Fatalf("after the new session: %+v", p)
	}
	if s.count(func() int { return s.heartbeats }) == 0 {
		t.Fatal("no heartbeat was sent")
	}

	srv.Stop()
	out := srv.Logs.String()
	for _, want := range []string{"Discord gateway connected", "Discord gateway session resumed", "Discord gateway connection dropped"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, simToken) {
		t.Errorf("the token is in the log:\n%s", out)
	}
}

// nekro doctor asks Discord who the bot is and where its Gateway is.
func TestDoctor(t *testing.T) {
	s := newSim(t)
	t.Setenv("NEKRO_DISCORD_API_URL", s.apiURL())
	t.Setenv("NEKRO_DISCORD_TOKEN", simToken)
	r := testutil.RunNekro(t, nil, "doctor", "--data", testutil.DataDir(t))
	if !strings.Contains(r.Stdout, "ok   discord: token accepted: the bot is Nekko (id "+botID+")") || !strings.Contains(r.Stdout, "ok   discord: gateway ws://") {
		t.Fatalf("doctor with the right token:\n%s\n%s", r.Stdout, r.Stderr)
	}
	t.Setenv("NEKRO_DISCORD_TOKEN", "wrong-token")
	r = testutil.RunNekro(t, nil, "doctor", "--data", testutil.DataDir(t))
	if !strings.Contains(r.Stdout, "warn discord: ") || !strings.Contains(r.Stdout, "HTTP 401") || !strings.Contains(r.Stdout, "--discord-token") {
		t.Fatalf("doctor with a wrong token:\n%s\n%s", r.Stdout, r.Stderr)
	}
}

// A wrong token, refused by GET /gateway/bot (401) or at IDENTIFY (close
// code 4004), is reported clearly, in the status and once in the log,
// and not retried in a loop.
func TestRefusedToken(t *testing.T) {
	for _, c := range []struct {
		name, token string
		refuse      bool
		want        string
		attempts    func(s *sim) int
	}{
		{"401", "wrong-token-value", false, "HTTP 401", func(s *sim) int { return len(s.gatewayBots) }},
		{"4004", simToken, true, "close code 4004", func(s *sim) int { return s.identifies }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSim(t)
			s.mu.Lock()
			s.refuse = c.refuse
			s.mu.Unlock()
			srv := testutil.Serve(t, testutil.DataDir(t), "api-tok", "NEKRO_LLM_BASE_URL=http://127.0.0.1:1/v1", "NEKRO_LLM_MODEL=scripted",
				"NEKRO_DISCORD_TOKEN="+c.token, "NEKRO_DISCORD_API_URL="+s.apiURL())
			logs := func() string { return srv.Logs.String() } // on failure only
			waitFor(t, "the refusal in the status", logs, func() bool {
				_, st := srv.API("GET", "/api/status", nil)
				return strings.Contains(st, c.want) && strings.Contains(st, "--discord-token") && strings.Contains(st, `"connected": false`)
			})
			first := s.count(func() int { return c.attempts(s) })
			time.Sleep(6 * time.Second) // count the attempts over a few seconds
			if n := s.count(func() int { return c.attempts(s) }); n > 2 || n-first > 1 {
				t.Fatalf("%d attempts within 6 s of the refusal: a tight loop", n)
			}
			srv.Stop()
			out := srv.Logs.String()
			if n := strings.Count(out, "Discord refused the bot"); n != 1 || !strings.Contains(out, "level=ERROR") {
				t.Errorf("the refusal should be logged once as an error (%d times):\n%s", n, out)
			}
			if strings.Contains(out, c.token) {
				t.Errorf("the token is in the log:\n%s", out)
			}
		})
	}
}
