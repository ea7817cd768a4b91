package qqbot_test

// A simulator of QQ's official bot platform, written from its public
// documentation (QQ 机器人文档, API v2: 接口调用与鉴权 for the access
// token, 事件订阅与通知 and 获取通用 WSS 接入点 for the WebSocket
// gateway and its opcodes, 事件 for GROUP_AT_MESSAGE_CREATE and
// C2C_MESSAGE_CREATE, 发送消息 and 富媒体消息 for replies and uploads,
// websocket 错误 for close codes), talks to the real `nekro serve`
// binary with a scripted model. It shares no code with the adapter.

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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

const (
	appID       = "102030405"
	appSecret   = "sim-app-secret-do-not-log"
	botID       = "9876543210123456789"
	aliceOpenID = "E4F4AEA33253A2797FB897C50B81D7ED"
	groupOpenID = "C9F778FE6ADF9D1D1DBE395BF744A33A"
	memberID    = "A1B2C3D4E5F60718293A4B5C6D7E8F90"
	// GROUP_AND_C2C_EVENT: group @-messages and C2C messages.
	wantIntents = 1 << 25
)

// sent is a message the send API accepted.
type sent struct {
	Path     string // /v2/users/{openid}/messages or /v2/groups/{group_openid}/messages
	Content  string
	MsgType  int
	MsgID    string
	MsgSeq   int
	FileInfo string
	Token    string
}

// upload is a rich-media upload the simulator accepted.
type upload struct {
	Path     string
	FileType int
	Data     []byte
	FileInfo string
}

type frame struct {
	seq int64
	b   []byte
}

// sim is the platform: the token endpoint at /app/getAppAccessToken,
// the OpenAPI (GET /gateway, the v2 send and upload APIs), users' media
// under /media/, and the gateway at /websocket.
type sim struct {
	t        *testing.T
	srv      *httptest.Server
	interval int64         // heartbeat_interval sent in HELLO, ms
	lifetime time.Duration // how long a token lives
	media    map[string][]byte

	mu         sync.Mutex
	tokens     map[string]time.Time // access token -> expiry
	current    string
	tokenReqs  []time.Time
	badAuth    []string        // requests refused for their token
	conn       *websocket.Conn // the identified or resumed connection
	sessionID  string
	seq        int64
	history    []frame
	identifies int
	resumes    []map[string]any
	connects   int
	heartbeats int
	msgIDs     map[string]bool // message ids the simulator sent, which replies may name
	replySeqs  map[string]bool // msg_id + msg_seq already used
	sent       []sent
	uploads    []upload
}

func newSim(t *testing.T, lifetime time.Duration) *sim {
	s := &sim{t: t, interval: 2500, lifetime: lifetime, media: map[string][]byte{}, tokens: map[string]time.Time{},
		msgIDs: map[string]bool{}, replySeqs: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /app/getAppAccessToken", s.accessToken)
	mux.HandleFunc("GET /gateway", func(w http.ResponseWriter, r *http.Request) {
		if s.authorized(w, r) != "" {
			writeJSON(w, 200, map[string]any{"url": "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/websocket/"})
		}
	})
	mux.HandleFunc("POST /v2/users/{openid}/messages", s.sendMessage)
	mux.HandleFunc("POST /v2/groups/{openid}/messages", s.sendMessage)
	mux.HandleFunc("POST /v2/users/{openid}/files", s.upload)
	mux.HandleFunc("POST /v2/groups/{openid}/files", s.upload)
	mux.HandleFunc("GET /media/", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		b, ok := s.media[r.URL.Path]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		w.Write(b)
	})
	mux.HandleFunc("GET /websocket/", s.gateway)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// accessToken is POST https://bots.qq.com/app/getAppAccessToken: the
// same token while more than 60 s of it are left, a new one in its last
// 60 s (the old one staying valid until it expires).
func (s *sim) accessToken(w http.ResponseWriter, r *http.Request) {
	var in struct {
		AppID        string `json:"appId"`
		ClientSecret string `json:"clientSecret"`
	}
	json.NewDecoder(r.Body).Decode(&in)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokenReqs = append(s.tokenReqs, time.Now())
	if in.AppID != appID || in.ClientSecret != appSecret {
		writeJSON(w, 200, map[string]any{"code": 100016, "message": "invalid appid or secret"})
		return
	}
	if exp, ok := s.tokens[s.current]; ok && time.Until(exp) > 60*time.Second {
		writeJSON(w, 200, map[string]any{"access_token": s.current, "expires_in": fmt.Sprint(int(time.Until(exp).Seconds()))})
		return
	}
	s.current = fmt.Sprintf("sim-access-token-%d", len(s.tokens)+1)
	s.tokens[s.current] = time.Now().Add(s.lifetime)
	// The documentation's example gives expires_in as a string.
	writeJSON(w, 200, map[string]any{"access_token": s.current, "expires_in": fmt.Sprint(int(s.lifetime.Seconds()))})
}

// valid says whether a token is one the simulator issued and is live.
func (s *sim) valid(tok string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.tokens[tok]
	return ok && time.Now().Before(exp)
}

// authorized checks "Authorization: QQBot <access token>", answering 401
// as the platform does; it returns the token, "" when refused.
func (s *sim) authorized(w http.ResponseWriter, r *http.Request) string {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "QQBot ")
	if !ok || !s.valid(tok) {
		s.mu.Lock()
		s.badAuth = append(s.badAuth, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		s.mu.Unlock()
		writeJSON(w, http.StatusUnauthorized, map[string]any{"code": 11244, "message": "token not exist or expire"})
		return ""
	}
	return tok
}

// sendMessage is POST /v2/users/{openid}/messages and
// /v2/groups/{group_openid}/messages, passive replies only.
func (s *sim) sendMessage(w http.ResponseWriter, r *http.Request) {
	tok := s.authorized(w, r)
	if tok == "" {
		return
	}
	var in struct {
		Content string `json:"content"`
		MsgType *int   `json:"msg_type"`
		MsgID   string `json:"msg_id"`
		MsgSeq  int    `json:"msg_seq"`
		Media   *struct {
			FileInfo string `json:"file_info"`
		} `json:"media"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.MsgType == nil {
		writeJSON(w, 400, map[string]any{"code": 40034, "message": "invalid request"})
		return
	}
	p := sent{Path: r.URL.Path, Content: in.Content, MsgType: *in.MsgType, MsgID: in.MsgID, MsgSeq: in.MsgSeq, Token: tok}
	s.mu.Lock()
	defer s.mu.Unlock()
	if in.MsgID == "" || !s.msgIDs[in.MsgID] {
		// Active messages are no longer delivered (since April 2025).
		writeJSON(w, 400, map[string]any{"code": 304026, "message": "msg_id invalid"})
		return
	}
	seq := in.MsgSeq
	if seq == 0 {
		seq = 1
	}
	if key := fmt.Sprint(in.MsgID, "/", seq); s.replySeqs[key] {
		writeJSON(w, 400, map[string]any{"code": 40054005, "message": "duplicate msg_id and msg_seq"})
		return
	} else {
		s.replySeqs[key] = true
	}
	switch p.MsgType {
	case 0:
		if strings.TrimSpace(in.Content) == "" {
			writeJSON(w, 400, map[string]any{"code": 40034, "message": "content empty"})
			return
		}
	case 7:
		if in.Media == nil || in.Media.FileInfo == "" || in.Content == "" {
			writeJSON(w, 400, map[string]any{"code": 40034, "message": "media.file_info and content are needed for msg_type 7"})
			return
		}
		found := false
		for _, u := range s.uploads {
			if u.FileInfo == in.Media.FileInfo && strings.TrimSuffix(u.Path, "/files") == strings.TrimSuffix(r.URL.Path, "/messages") {
				found = true
			}
		}
		if !found {
			writeJSON(w, 400, map[string]any{"code": 304083, "message": "convert media info fail"})
			return
		}
		p.FileInfo = in.Media.FileInfo
	default:
		s.t.Errorf("send: msg_type %d", p.MsgType)
	}
	s.sent = append(s.sent, p)
	writeJSON(w, 200, map[string]any{"id": fmt.Sprintf("BOTMSG_%d", len(s.sent)), "timestamp": time.Now().Unix()})
}

// upload is POST /v2/users/{openid}/files and /v2/groups/{group_openid}/files.
func (s *sim) upload(w http.ResponseWriter, r *http.Request) {
	if s.authorized(w, r) == "" {
		return
	}
	var in struct {
		FileType   int    `json:"file_type"`
		URL        string `json:"url"`
		SrvSendMsg *bool  `json:"srv_send_msg"`
		FileData   string `json:"file_data"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.FileType < 1 || in.FileType > 4 || in.SrvSendMsg == nil {
		writeJSON(w, 400, map[string]any{"code": 40034, "message": "invalid request"})
		return
	}
	if *in.SrvSendMsg {
		s.t.Errorf("upload with srv_send_msg true: that spends an active message")
	}
	data, err := base64.StdEncoding.DecodeString(in.FileData)
	if err != nil || len(data) == 0 {
		writeJSON(w, 400, map[string]any{"code": 40034, "message": "file_data is not base64"})
		return
	}
	s.mu.Lock()
	u := upload{Path: r.URL.Path, FileType: in.FileType, Data: data, FileInfo: fmt.Sprintf("FILEINFO%d", len(s.uploads)+1)}
	s.uploads = append(s.uploads, u)
	s.mu.Unlock()
	writeJSON(w, 200, map[string]any{"file_uuid": fmt.Sprintf("uuid-%d", len(s.uploads)), "file_info": u.FileInfo, "ttl": 3600})
}

// gateway is one WebSocket connection: HELLO, then IDENTIFY or RESUME,
// heartbeats, and dispatches.
func (s *sim) gateway(w http.ResponseWriter, r *http.Request) {
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
			ws.Close(4002, "invalid payload")
			return
		}
		switch p.Op {
		case 1:
			s.mu.Lock()
			s.heartbeats++
			s.mu.Unlock()
			send(map[string]any{"op": 11})
		case 2:
			var id struct {
				Token   string `json:"token"`
				Intents int    `json:"intents"`
				Shard   []int  `json:"shard"`
			}
			json.Unmarshal(p.D, &id)
			s.mu.Lock()
			s.identifies++
			s.mu.Unlock()
			tok, ok := strings.CutPrefix(id.Token, "QQBot ")
			if !ok || !s.valid(tok) {
				ws.Close(4004, "invalid token")
				return
			}
			if id.Intents&wantIntents != wantIntents {
				s.t.Errorf("IDENTIFY intents %b lack %b", id.Intents, wantIntents)
			}
			if len(id.Shard) != 2 || id.Shard[1] < 1 {
				s.t.Errorf("IDENTIFY shard %v", id.Shard)
			}
			s.mu.Lock()
			s.sessionID = fmt.Sprintf("session-%d", s.identifies)
			s.seq, s.history, s.conn = 0, nil, ws
			sid := s.sessionID
			s.mu.Unlock()
			s.dispatch("READY", map[string]any{"version": 1, "session_id": sid,
				"user": map[string]any{"id": botID, "username": "nekko-bot", "bot": true}, "shard": []int{0, 1}})
		case 6:
			var rs struct {
				Token     string `json:"token"`
				SessionID string `json:"session_id"`
				Seq       int64  `json:"seq"`
			}
			json.Unmarshal(p.D, &rs)
			var m map[string]any
			json.Unmarshal(p.D, &m)
			tok, _ := strings.CutPrefix(rs.Token, "QQBot ")
			live := s.valid(tok)
			s.mu.Lock()
			s.resumes = append(s.resumes, m)
			ok := rs.SessionID == s.sessionID && live
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
			s.dispatch("RESUMED", "")
		default:
			ws.Close(4001, "invalid opcode")
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
	if m, ok := d.(map[string]any); ok {
		if id, ok := m["id"].(string); ok {
			s.msgIDs[id] = true
		}
	}
	b, _ := json.Marshal(map[string]any{"op": 0, "s": s.seq, "t": t, "d": d, "id": fmt.Sprintf("%s:%d", t, s.seq)})
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

var msgN atomic.Int64

// c2c is a C2C_MESSAGE_CREATE's data.
func c2c(content string) map[string]any {
	return map[string]any{"id": fmt.Sprintf("ROBOT1.0_c2c.%d", msgN.Add(1)), "author": map[string]any{"user_openid": aliceOpenID},
		"content": content, "timestamp": time.Now().Format(time.RFC3339)}
}

// groupAt is a GROUP_AT_MESSAGE_CREATE's data: the mention itself is
// not in the content, which starts with a space.
func groupAt(content string) map[string]any {
	return map[string]any{"id": fmt.Sprintf("ROBOT1.0_grp.%d", msgN.Add(1)), "author": map[string]any{"member_openid": memberID},
		"content": " " + content, "group_openid": groupOpenID, "timestamp": time.Now().Format(time.RFC3339)}
}

// waitFor polls cond until it holds, for up to a minute and a half.
func waitFor(t *testing.T, what string, logs func() string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited for %s\n%s", what, logs())
		}
	}
}

// next waits for a message sent after the first n and returns it.
func (s *sim) next(t *testing.T, n *int, logs func() string) sent {
	t.Helper()
	var p sent
	waitFor(t, fmt.Sprintf("sent message #%d", *n+1), logs, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.sent) > *n {
			p = s.sent[*n]
			return true
		}
		return false
	})
	*n++
	return p
}

func (s *sim) summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, p := range s.sent {
		fmt.Fprintf(&b, "sent to %s: type %d %.60q (reply to %s #%d)\n", p.Path, p.MsgType, p.Content, p.MsgID, p.MsgSeq)
	}
	fmt.Fprintf(&b, "%d token requests, refused auth: %q\n", len(s.tokenReqs), s.badAuth)
	return b.String()
}

func (s *sim) count(f func() int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return f()
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

// model answers the latest of the test's requests the prompt holds.
func model(t *testing.T, img []byte) *llmtest.Server {
	replies := map[string]string{
		"send me a picture": fmt.Sprintf(`import base64
open("/app/shared/dot.png", "wb").write(base64.b64decode(%q))
send_msg_file(_ck, "/app/shared/dot.png")`, base64.StdEncoding.EncodeToString(img)),
		"look at this": `send_msg_text(_ck, "image bytes %d" % len(open("/app/uploads/cat.png", "rb").read()))`,
		"hello there":  `send_msg_text(_ck, "pong group")`,
		"say it twice": `send_msg_text(_ck, "first")
send_msg_text(_ck, "second")`,
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

// The bot against the simulated platform: it identifies with a token
// from the app id and secret; a C2C message is answered as a passive
// reply (msg_id, msg_seq counting up); a group @-message is answered; an
// image comes in and goes out (upload, then msg_type 7); after the
// connection drops the session is resumed and the events sent meanwhile
// replayed, and resumed again when the gateway asks (op 7); tokens living 12 s are renewed before they expire, so no
// call is ever refused; an API user cannot take a qqbot- chat.
func TestGateway(t *testing.T) {
	img := pngBytes(t)
	m := model(t, img)
	s := newSim(t, 12*time.Second)
	srv := testutil.Serve(t, testutil.DataDir(t), "api-tok", "NEKRO_LLM_BASE_URL="+m.URL, "NEKRO_LLM_MODEL=scripted",
		"NEKRO_QQBOT_APP_ID="+appID, "NEKRO_QQBOT_SECRET="+appSecret, "NEKRO_QQBOT_API_URL="+s.srv.URL,
		"NEKRO_QQBOT_TOKEN_URL="+s.srv.URL+"/app/getAppAccessToken", "NEKRO_LOG_LEVEL=info")
	logs := func() string { return s.summary() + srv.Logs.String() } // on failure only
	n, start := 0, time.Now()

	waitFor(t, "READY", logs, func() bool { return s.count(func() int { return s.connects }) == 1 })
	waitFor(t, "the status to show the connection", logs, func() bool {
		_, st := srv.API("GET", "/api/status", nil)
		return strings.Contains(st, `"name": "qqbot"`) && strings.Contains(st, `"connected": true`) && strings.Contains(st, `"self_id": "`+botID+`"`)
	})

	// A C2C message: one passive reply to it.
	msg := c2c("ping one")
	s.dispatch("C2C_MESSAGE_CREATE", msg)
	p := s.next(t, &n, logs)
	if p.Path != "/v2/users/"+aliceOpenID+"/messages" || p.Content != "pong one" || p.MsgType != 0 || p.MsgID != msg["id"] || p.MsgSeq != 1 {
		t.Fatalf("C2C answer: %+v", p)
	}

	// The platform may deliver a message twice, here after it was
	// answered: it is stored and answered once (the next message sent
	// answers the next message).
	s.dispatch("C2C_MESSAGE_CREATE", msg)

	// Two messages answering one: msg_seq 1 and 2 with the same msg_id.
	msg = c2c("say it twice")
	s.dispatch("C2C_MESSAGE_CREATE", msg)
	p1, p2 := s.next(t, &n, logs), s.next(t, &n, logs)
	if p1.Content != "first" || p2.Content != "second" || p1.MsgID != msg["id"] || p2.MsgID != msg["id"] || p1.MsgSeq != 1 || p2.MsgSeq != 2 {
		t.Fatalf("two replies to one message: %+v, %+v", p1, p2)
	}
	_, hist := srv.API("GET", "/api/chats/qqbot-private_"+aliceOpenID+"/messages", nil)
	if c := strings.Count(hist, "ping one"); c != 1 {
		t.Fatalf("a message delivered twice is stored %d times:\n%s", c, hist)
	}

	// A group @-message: answered in the group, from its member.
	msg = groupAt("hello there")
	s.dispatch("GROUP_AT_MESSAGE_CREATE", msg)
	p = s.next(t, &n, logs)
	if p.Path != "/v2/groups/"+groupOpenID+"/messages" || p.Content != "pong group" || p.MsgID != msg["id"] || p.MsgSeq != 1 {
		t.Fatalf("group answer: %+v", p)
	}
	_, hist = srv.API("GET", "/api/chats/qqbot-group_"+groupOpenID+"/messages", nil)
	if !strings.Contains(hist, "hello there") || !strings.Contains(hist, `"sender_id": "qqbot:`+memberID+`"`) {
		t.Fatalf("group history:\n%s", hist)
	}

	// An image in: fetched from the attachment's URL into the chat's
	// uploads, where the model's code reads it.
	s.mu.Lock()
	s.media["/media/cat.png"] = img
	s.mu.Unlock()
	msg = c2c("look at this")
	msg["attachments"] = []any{map[string]any{"content_type": "image/png", "filename": "cat.png", "height": 2, "width": 3,
		"size": len(img), "url": s.srv.URL + "/media/cat.png"}}
	s.dispatch("C2C_MESSAGE_CREATE", msg)
	if p = s.next(t, &n, logs); p.Content != fmt.Sprintf("image bytes %d", len(img)) {
		t.Fatalf("image in: %+v", p)
	}

	// An image out: uploaded (file_type 1, its bytes intact), then sent
	// as a media message naming the upload's file_info.
	msg = groupAt("send me a picture")
	s.dispatch("GROUP_AT_MESSAGE_CREATE", msg)
	p = s.next(t, &n, logs)
	s.mu.Lock()
	ups := append([]upload(nil), s.uploads...)
	s.mu.Unlock()
	if len(ups) != 1 || ups[0].Path != "/v2/groups/"+groupOpenID+"/files" || ups[0].FileType != 1 || !bytes.Equal(ups[0].Data, img) {
		t.Fatalf("upload: %+v", ups)
	}
	if p.MsgType != 7 || p.FileInfo != ups[0].FileInfo || p.MsgID != msg["id"] || p.MsgSeq != 1 {
		t.Fatalf("media message: %+v", p)
	}

	// An API user cannot create or join a QQ bot chat.
	st, body := srv.API("POST", "/api/users", map[string]string{"user_id": "mallory"})
	var u struct{ Token string }
	if json.Unmarshal([]byte(body), &u); st != http.StatusCreated || u.Token == "" {
		t.Fatalf("add user: %d %s", st, body)
	}
	for _, key := range []string{"qqbot-private_" + aliceOpenID, "qqbot-group_" + groupOpenID, "qqbot-anything"} {
		if st, body := srv.Call("POST", "/api/chats/"+key+"/messages", u.Token, map[string]string{"text": "first!"}); st != http.StatusForbidden || !strings.Contains(body, "qqbot adapter") {
			t.Errorf("user posting to %s: %d %s, want 403 naming the adapter", key, st, body)
		}
	}

	// The connection drops with an event not yet delivered: nekro resumes
	// with the session id and the last sequence it read, and the event is
	// replayed.
	s.mu.Lock()
	lastSeq := s.seq
	s.mu.Unlock()
	msg = c2c("ping two")
	s.dispatchTo("C2C_MESSAGE_CREATE", msg, false)
	s.drop()
	p = s.next(t, &n, logs)
	s.mu.Lock()
	resumes := append([]map[string]any(nil), s.resumes...)
	identifies := s.identifies
	s.mu.Unlock()
	if p.Content != "pong two" || p.MsgID != msg["id"] || len(resumes) != 1 || identifies != 1 {
		t.Fatalf("after the drop: %+v, %d resumes, %d identifies", p, len(resumes), identifies)
	}
	if r := resumes[0]; r["session_id"] != "session-1" || r["seq"] != float64(lastSeq) || !strings.HasPrefix(fmt.Sprint(r["token"]), "QQBot sim-access-token-") {
		t.Fatalf("RESUME %v, want session-1, seq %d and a QQBot token", r, lastSeq)
	}

	// The gateway asks for a reconnection (op 7): nekro resumes again.
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"op": 7})
	c.Write(context.Background(), websocket.MessageText, b)
	waitFor(t, "a RESUME after op 7", logs, func() bool { return s.count(func() int { return len(s.resumes) }) >= 2 })
	waitFor(t, "RESUMED", logs, func() bool { return s.count(func() int { return s.connects }) >= 3 })
	if n := s.count(func() int { return s.identifies }); n != 1 {
		t.Fatalf("%d IDENTIFYs after op 7, want the session resumed", n)
	}

	// Tokens live 12 s: by the third one nekro has renewed twice, before
	// each expired (no call was refused), and keeps answering.
	waitFor(t, "a third access token", logs, func() bool { return s.count(func() int { return len(s.tokens) }) >= 3 })
	msg = c2c("ping three")
	s.dispatch("C2C_MESSAGE_CREATE", msg)
	if p = s.next(t, &n, logs); p.Content != "pong three" {
		t.Fatalf("after the token renewals: %+v", p)
	}
	s.mu.Lock()
	bad, reqs, tokensUsed := append([]string(nil), s.badAuth...), len(s.tokenReqs), map[string]bool{}
	for _, p := range s.sent {
		tokensUsed[p.Token] = true
	}
	s.mu.Unlock()
	if len(bad) != 0 {
		t.Errorf("calls refused for their token (not renewed in time): %q", bad)
	}
	if len(tokensUsed) < 2 {
		t.Errorf("every message went with one token (%v): not renewed", tokensUsed)
	}
	if most := int(time.Since(start)/(6*time.Second)) + 3; reqs > most {
		t.Errorf("%d token requests in %s of 12 s tokens: asking too often", reqs, time.Since(start))
	}
	if s.count(func() int { return s.heartbeats }) == 0 {
		t.Error("no heartbeat was sent")
	}

	srv.Stop()
	out := srv.Logs.String()
	for _, want := range []string{"QQ bot gateway connected", "QQ bot gateway session resumed", "QQ bot gateway connection dropped"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, appSecret) || strings.Contains(out, "sim-access-token-") {
		t.Errorf("a secret or token is in the log:\n%s", out)
	}
}

// nekro doctor gets a token and asks where the gateway is.
func TestDoctor(t *testing.T) {
	s := newSim(t, 2*time.Hour)
	t.Setenv("NEKRO_QQBOT_API_URL", s.srv.URL)
	t.Setenv("NEKRO_QQBOT_TOKEN_URL", s.srv.URL+"/app/getAppAccessToken")
	t.Setenv("NEKRO_QQBOT_APP_ID", appID)
	t.Setenv("NEKRO_QQBOT_SECRET", appSecret)
	r := testutil.RunNekro(t, nil, "doctor", "--data", testutil.DataDir(t))
	if !strings.Contains(r.Stdout, "ok   qqbot: access token granted for app id "+appID) || !strings.Contains(r.Stdout, "ok   qqbot: gateway ws://") {
		t.Fatalf("doctor with the right secret:\n%s\n%s", r.Stdout, r.Stderr)
	}
	t.Setenv("NEKRO_QQBOT_SECRET", "wrong-secret")
	r = testutil.RunNekro(t, nil, "doctor", "--data", testutil.DataDir(t))
	if !strings.Contains(r.Stdout, "warn qqbot: ") || !strings.Contains(r.Stdout, "code 100016") || !strings.Contains(r.Stdout, "NEKRO_QQBOT_SECRET") {
		t.Fatalf("doctor with a wrong secret:\n%s\n%s", r.Stdout, r.Stderr)
	}
}

// A wrong secret is reported clearly, in the status and once in the
// log, and not retried in a loop.
func TestBadSecret(t *testing.T) {
	s := newSim(t, 2*time.Hour)
	srv := testutil.Serve(t, testutil.DataDir(t), "api-tok", "NEKRO_LLM_BASE_URL=http://127.0.0.1:1/v1", "NEKRO_LLM_MODEL=scripted",
		"NEKRO_QQBOT_APP_ID="+appID, "NEKRO_QQBOT_SECRET=wrong-secret-value", "NEKRO_QQBOT_API_URL="+s.srv.URL,
		"NEKRO_QQBOT_TOKEN_URL="+s.srv.URL+"/app/getAppAccessToken")
	logs := func() string { return s.summary() + srv.Logs.String() } // on failure only
	waitFor(t, "the refusal in the status", logs, func() bool {
		_, st := srv.API("GET", "/api/status", nil)
		return strings.Contains(st, "code 100016") && strings.Contains(st, "NEKRO_QQBOT_SECRET") && strings.Contains(st, `"connected": false`)
	})
	first := s.count(func() int { return len(s.tokenReqs) })
	time.Sleep(6 * time.Second) // count the requests over a few seconds
	if n := s.count(func() int { return len(s.tokenReqs) }); n > 2 || n-first > 1 {
		t.Fatalf("%d token requests within 6 s of the refusal: a tight loop", n)
	}
	if s.count(func() int { return s.identifies }) != 0 {
		t.Fatal("identified without a token")
	}
	srv.Stop()
	out := srv.Logs.String()
	if n := strings.Count(out, "QQ bot platform refused the bot"); n != 1 || !strings.Contains(out, "level=ERROR") {
		t.Errorf("the refusal should be logged once as an error (%d times):\n%s", n, out)
	}
	if strings.Contains(out, "wrong-secret-value") {
		t.Errorf("the secret is in the log:\n%s", out)
	}
}
