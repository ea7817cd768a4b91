package onebot_test

// A OneBot v11 implementation simulator, written from the specification
// (github.com/botuniverse/onebot-11: communication/ws.md and
// ws-reverse.md, event/message.md and meta.md, api/public.md,
// message/array.md and string.md), talks to the real `nekro serve`
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

const selfID = 999

// action is an API call the simulator received.
type action struct {
	Action string          `json:"action"`
	Params json.RawMessage `json:"params"`
	Echo   json.RawMessage `json:"echo"`
}

// sim is one Universal connection of the simulated implementation: it
// answers get_login_info and the send and upload actions as the
// specification says, answers the read-only group actions for group 200
// (members 42 and the bot), never answers get_group_member_info in any
// other group (the action that times out), and records every action.
type sim struct {
	t       *testing.T
	ws      *websocket.Conn
	actions chan action
	msgID   int
	mu      sync.Mutex
	// holdSends, when set, leaves the send actions unanswered (recorded
	// all the same): the implementation hangs mid-delivery.
	holdSends atomic.Bool
	// logs, when set, is nekro's output, shown when an action never
	// comes (a failure on a loaded CI machine then says why).
	logs *bytes.Buffer
}

func newSim(t *testing.T, ws *websocket.Conn) *sim {
	s := &sim{t: t, ws: ws, actions: make(chan action, 100)}
	ws.SetReadLimit(64 << 20)
	go s.loop()
	// A lifecycle event, then a heartbeat, as implementations send them.
	s.send(map[string]any{"time": time.Now().Unix(), "self_id": selfID, "post_type": "meta_event",
		"meta_event_type": "lifecycle", "sub_type": "connect"})
	s.send(map[string]any{"time": time.Now().Unix(), "self_id": selfID, "post_type": "meta_event",
		"meta_event_type": "heartbeat", "status": map[string]any{"online": true, "good": true}, "interval": 60000})
	return s
}

func (s *sim) loop() {
	for {
		_, b, err := s.ws.Read(context.Background())
		if err != nil {
			close(s.actions)
			return
		}
		var a action
		if err := json.Unmarshal(b, &a); err != nil {
			s.t.Errorf("the implementation got a frame that is not an action: %s", b)
			continue
		}
		var data any
		switch a.Action {
		case "get_login_info":
			data = map[string]any{"user_id": selfID, "nickname": "Nekko"}
		case "get_group_member_info":
			var p struct {
				GroupID int64 `json:"group_id"`
				UserID  int64 `json:"user_id"`
			}
			json.Unmarshal(a.Params, &p)
			if p.GroupID != 200 {
				s.actions <- a
				continue // never answered
			}
			// Group 200 has two members, 42 and the bot.
			if p.UserID != 42 && p.UserID != selfID {
				s.reply(a, "failed", 100, nil)
				s.actions <- a
				continue
			}
			data = map[string]any{"group_id": 200, "user_id": p.UserID, "nickname": fmt.Sprint("member ", p.UserID), "role": "member"}
		case "get_group_info":
			var p struct {
				GroupID int64 `json:"group_id"`
			}
			json.Unmarshal(a.Params, &p)
			data = map[string]any{"group_id": p.GroupID, "group_name": fmt.Sprint("group ", p.GroupID), "member_count": 2, "max_member_count": 200}
		case "get_group_member_list":
			data = []map[string]any{{"group_id": 200, "user_id": 42, "nickname": "alice"}, {"group_id": 200, "user_id": selfID, "nickname": "Nekko"}}
		case "get_stranger_info":
			var p struct {
				UserID int64 `json:"user_id"`
			}
			json.Unmarshal(a.Params, &p)
			data = map[string]any{"user_id": p.UserID, "nickname": fmt.Sprint("stranger ", p.UserID), "sex": "unknown", "age": 0}
		case "send_group_msg", "send_private_msg", "send_msg":
			if s.holdSends.Load() {
				s.actions <- a
				continue
			}
			s.mu.Lock()
			s.msgID++
			data = map[string]any{"message_id": s.msgID}
			s.mu.Unlock()
		case "upload_group_file", "upload_private_file":
			data = nil
		default:
			s.reply(a, "failed", 1404, nil)
			s.actions <- a
			continue
		}
		s.reply(a, "ok", 0, data)
		s.actions <- a
	}
}

func (s *sim) reply(a action, status string, retcode int, data any) {
	b, _ := json.Marshal(map[string]any{"status": status, "retcode": retcode, "data": data, "echo": a.Echo})
	s.ws.Write(context.Background(), websocket.MessageText, b)
}

func (s *sim) send(ev map[string]any) {
	b, _ := json.Marshal(ev)
	if err := s.ws.Write(context.Background(), websocket.MessageText, b); err != nil {
		s.t.Fatalf("simulator: send event: %v", err)
	}
}

func (s *sim) nextID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgID++
	return s.msgID
}

// groupMessage sends a group message event in the array form.
func (s *sim) groupMessage(group, user int, nickname string, segments ...map[string]any) {
	s.send(map[string]any{"time": time.Now().Unix(), "self_id": selfID, "post_type": "message", "message_type": "group",
		"sub_type": "normal", "message_id": s.nextID(), "group_id": group, "user_id": user, "anonymous": nil,
		"message": segments, "raw_message": "", "font": 0,
		"sender": map[string]any{"user_id": user, "nickname": nickname, "card": "", "role": "member"}})
}

// privateMessage sends a private message event in the string (CQ code) form.
func (s *sim) privateMessage(user int, nickname, cq string) {
	s.send(map[string]any{"time": time.Now().Unix(), "self_id": selfID, "post_type": "message", "message_type": "private",
		"sub_type": "friend", "message_id": s.nextID(), "user_id": user, "message": cq, "raw_message": cq, "font": 0,
		"sender": map[string]any{"user_id": user, "nickname": nickname}})
}

// waitAction returns the next action named name (others are passed over).
func (s *sim) waitAction(name string) action {
	s.t.Helper()
	timeout := time.After(90 * time.Second)
	for {
		select {
		case a, ok := <-s.actions:
			if !ok {
				s.t.Fatalf("the connection closed while waiting for %s", name)
			}
			if a.Action == name {
				return a
			}
		case <-timeout:
			if s.logs != nil {
				s.t.Fatalf("nekro never called %s; its log:\n%s", name, s.logs)
			}
			s.t.Fatalf("nekro never called %s", name)
		}
	}
}

type sendParams struct {
	GroupID int64 `json:"group_id"`
	UserID  int64 `json:"user_id"`
	Message []struct {
		Type string            `json:"type"`
		Data map[string]string `json:"data"`
	} `json:"message"`
}

func parseSend(t *testing.T, a action) sendParams {
	t.Helper()
	var p sendParams
	if err := json.Unmarshal(a.Params, &p); err != nil {
		t.Fatalf("%s params %s: %v", a.Action, a.Params, err)
	}
	return p
}

func (p sendParams) text() string {
	var b strings.Builder
	for _, s := range p.Message {
		if s.Type == "text" {
			b.WriteString(s.Data["text"])
		}
	}
	return b.String()
}

func seg(typ string, data map[string]any) map[string]any {
	return map[string]any{"type": typ, "data": data}
}

// model answers each kind of message the tests send.
func model(t *testing.T) *llmtest.Server {
	m, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		last := r.Last()
		switch {
		case strings.Contains(last, "draw me a dot"):
			return llmtest.Code(`import zlib, struct
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b"")
open("/app/shared/dot.png", "wb").write(png)
send_msg_file(_ck, "/app/shared/dot.png")`)
		case strings.Contains(last, "send me the report"):
			return llmtest.Code(`open("/app/shared/report.csv", "w").write("day,cups\nmon,3\n")
send_msg_file(_ck, "/app/shared/report.csv")`)
		case strings.Contains(last, "look at this"):
			return llmtest.Code(`send_msg_text(_ck, "image bytes %d" % len(open("/app/uploads/cat.png", "rb").read()))`)
		case strings.Contains(last, "hello there"):
			return llmtest.Code(`send_msg_text(_ck, "pong group")`)
		case strings.Contains(last, "ping two"):
			return llmtest.Code(`send_msg_text(_ck, "pong two")`)
		case strings.Contains(last, "ping one"):
			return llmtest.Code(`send_msg_text(_ck, "pong one")`)
		case strings.Contains(last, "break please"):
			return llmtest.Reply{Status: http.StatusBadRequest, Text: "refused by http://10.0.0.9:8000/v1"}
		}
		return llmtest.Code(`send_msg_text(_ck, "?")`)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
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

func dialReverse(addr string, hdr http.Header) (*websocket.Conn, *http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return websocket.Dial(ctx, "ws://"+addr+"/onebot/v11/ws", &websocket.DialOptions{HTTPHeader: hdr})
}

func reverseHeaders(token string) http.Header {
	h := http.Header{"X-Self-Id": {fmt.Sprint(selfID)}, "X-Client-Role": {"Universal"}}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	return h
}

// Reverse WebSocket: the implementation connects to nekro. A missing or
// wrong token is refused at the upgrade; a group message without a
// mention is kept but not answered; one with an @ is answered in the
// group, though the member-name lookup it causes times out; a private
// message in CQ-code form is answered privately; an image comes in
// (fetched from the implementation's file server) and one goes out; after
// the implementation drops and reconnects, messages flow again.
func TestReverseWebSocket(t *testing.T) {
	m := model(t)
	img := pngBytes(t)
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write(img)
	}))
	defer files.Close()
	fileHost := strings.TrimPrefix(files.URL, "http://")
	srv := testutil.Serve(t, testutil.DataDir(t), "api-tok", "NEKRO_LLM_BASE_URL="+m.URL, "NEKRO_LLM_MODEL=scripted",
		"NEKRO_ONEBOT_TOKEN=ob-secret", "NEKRO_ONEBOT_ACTION_TIMEOUT=1s", "NEKRO_ONEBOT_FILE_HOSTS="+fileHost)

	for _, c := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {"wrong", http.StatusForbidden}} {
		ws, resp, err := dialReverse(srv.Addr, reverseHeaders(c.token))
		if err == nil {
			ws.CloseNow()
			t.Fatalf("token %q: the upgrade was accepted", c.token)
		}
		if resp == nil || resp.StatusCode != c.want {
			t.Fatalf("token %q: %v %v, want HTTP %d", c.token, resp, err, c.want)
		}
	}
	if st, _ := srv.Call("GET", "/api/status", "ob-secret", nil); st != http.StatusUnauthorized {
		t.Fatalf("the OneBot token opened the API: %d", st)
	}

	ws, _, err := dialReverse(srv.Addr, reverseHeaders("ob-secret"))
	if err != nil {
		t.Fatalf("reverse connection with the token: %v\n%s", err, srv.Logs)
	}
	s := newSim(t, ws)
	s.logs = srv.Logs
	s.waitAction("get_login_info")

	// Not addressed to the bot: kept as context, no turn.
	s.groupMessage(100, 42, "alice", seg("text", map[string]any{"text": "just chatting about the weather"}))
	// Addressed with an @ (and mentioning a member whose name lookup
	// never answers): answered in the group.
	s.groupMessage(100, 42, "alice", seg("at", map[string]any{"qq": fmt.Sprint(selfID)}),
		seg("text", map[string]any{"text": " hello there "}), seg("at", map[string]any{"qq": "555"}))
	s.waitAction("get_group_member_info")
	p := parseSend(t, s.waitAction("send_group_msg"))
	if p.GroupID != 100 || p.text() != "pong group" {
		t.Fatalf("group answer: %+v", p)
	}
	reqs := m.RequestsFor("onebot_v11-group_100")
	if len(reqs) != 1 || !reqs[0].Contains("just chatting about the weather") {
		t.Fatalf("the unaddressed message should be in the one turn's prompt, not answered itself: %d requests", len(reqs))
	}
	_, hist := srv.API("GET", "/api/chats/onebot_v11-group_100/messages", nil)
	if !strings.Contains(hist, "@Nekko hello there @555") || !strings.Contains(hist, `"sender_id": "onebot_v11:42"`) {
		t.Fatalf("history:\n%s", hist)
	}

	// A private message in the CQ-code string form.
	s.privateMessage(42, "alice", "ping one [CQ:face,id=14]")
	p = parseSend(t, s.waitAction("send_private_msg"))
	if p.UserID != 42 || p.text() != "pong one" {
		t.Fatalf("private answer: %+v", p)
	}

	// An image in: fetched from the implementation's file server into the
	// chat's uploads, where the model's code reads it.
	s.groupMessage(100, 42, "alice", seg("at", map[string]any{"qq": fmt.Sprint(selfID)}), seg("text", map[string]any{"text": " look at this"}),
		seg("image", map[string]any{"file": "cat.png", "url": files.URL + "/download?id=cat"}))
	p = parseSend(t, s.waitAction("send_group_msg"))
	if want := fmt.Sprintf("image bytes %d", len(img)); p.text() != want {
		t.Fatalf("image in: %q, want %q\n%s", p.text(), want, srv.Logs)
	}
	// An image out: an image segment with the PNG as base64://.
	s.groupMessage(100, 42, "alice", seg("text", map[string]any{"text": "Nekko, draw me a dot"})) // named, not @-ed
	p = parseSend(t, s.waitAction("send_group_msg"))
	if len(p.Message) != 1 || p.Message[0].Type != "image" || !strings.HasPrefix(p.Message[0].Data["file"], "base64://") {
		t.Fatalf("image out: %+v", p)
	}
	out, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(p.Message[0].Data["file"], "base64://"))
	if err != nil || !bytes.HasPrefix(out, []byte("\x89PNG")) {
		t.Fatalf("image out is not a PNG: %v %q", err, out[:min(8, len(out))])
	}

	// Another file out: uploaded to the (new) private chat with its name.
	s.privateMessage(43, "carol", "send me the report")
	up := s.waitAction("upload_private_file")
	var upload struct {
		UserID int64  `json:"user_id"`
		File   string `json:"file"`
		Name   string `json:"name"`
	}
	if err := json.Unmarshal(up.Params, &upload); err != nil {
		t.Fatalf("upload_private_file params: %v: %s", err, up.Params)
	}
	body, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(upload.File, "base64://"))
	if upload.UserID != 43 || upload.Name != "report.csv" || !strings.HasPrefix(upload.File, "base64://") || err != nil || string(body) != "day,cups\nmon,3\n" {
		t.Fatalf("file out: %+v (%v) %q", upload, err, body)
	}

	_, st := srv.API("GET", "/api/status", nil)
	if !strings.Contains(st, `"connected": true`) || !strings.Contains(st, `"self_id": "999"`) || !strings.Contains(st, `"mode": "reverse"`) {
		t.Fatalf("status:\n%s", st)
	}

	// The implementation drops and reconnects: messages flow again.
	ws.Close(websocket.StatusGoingAway, "restarting")
	ws2, _, err := dialReverse(srv.Addr, reverseHeaders("ob-secret"))
	if err != nil {
		t.Fatalf("reconnect: %v", err)
	}
	s2 := newSim(t, ws2)
	s2.logs = srv.Logs
	s2.privateMessage(42, "alice", "ping two")
	if p := parseSend(t, s2.waitAction("send_private_msg")); p.UserID != 42 || p.text() != "pong two" {
		t.Fatalf("after the reconnection: %+v", p)
	}
	// A turn that fails tells the QQ user so, once, without internals.
	s2.privateMessage(44, "dave", "break please")
	if p := parseSend(t, s2.waitAction("send_private_msg")); p.UserID != 44 ||
		p.text() != "Sorry, I could not answer this time. Please try again later." {
		t.Fatalf("a failed turn's message: %+v", p)
	}
	ws2.Close(websocket.StatusNormalClosure, "")
}

// Forward WebSocket: nekro dials the implementation (with its token), and
// dials again after the implementation drops the connection.
func TestForwardWebSocket(t *testing.T) {
	m := model(t)
	conns := make(chan *websocket.Conn, 4)
	impl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer fw-secret" {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		conns <- ws
		<-r.Context().Done()
	}))
	defer impl.Close()
	srv := testutil.Serve(t, testutil.DataDir(t), "api-tok", "NEKRO_LLM_BASE_URL="+m.URL, "NEKRO_LLM_MODEL=scripted",
		"NEKRO_ONEBOT_WS_URL=ws"+strings.TrimPrefix(impl.URL, "http")+"/", "NEKRO_ONEBOT_TOKEN=fw-secret")
	next := func() *websocket.Conn {
		select {
		case ws := <-conns:
			return ws
		case <-time.After(60 * time.Second):
			t.Fatalf("nekro never dialed the implementation\n%s", srv.Logs)
			return nil
		}
	}
	ws := next()
	s := newSim(t, ws)
	s.privateMessage(7, "bob", "ping one")
	if p := parseSend(t, s.waitAction("send_private_msg")); p.UserID != 7 || p.text() != "pong one" {
		t.Fatalf("forward answer: %+v", p)
	}
	_, st := srv.API("GET", "/api/status", nil)
	if !strings.Contains(st, `"mode": "forward"`) || !strings.Contains(st, `"connected": true`) {
		t.Fatalf("status:\n%s", st)
	}

	ws.Close(websocket.StatusGoingAway, "implementation restarting")
	ws2 := next()
	s2 := newSim(t, ws2)
	s2.privateMessage(7, "bob", "ping two")
	if p := parseSend(t, s2.waitAction("send_private_msg")); p.UserID != 7 || p.text() != "pong two" {
		t.Fatalf("after nekro dialed again: %+v", p)
	}
	ws2.Close(websocket.StatusNormalClosure, "")
}

// An implementation that reconnects before nekro has seen its old
// connection end (the old one is dropped after the new one is up) stays
// connected: its answers are still sent, and the status says connected.
func TestReconnectBeforeTheOldConnectionEnds(t *testing.T) {
	m := model(t)
	srv := testutil.Serve(t, testutil.DataDir(t), "api-tok", "NEKRO_LLM_BASE_URL="+m.URL, "NEKRO_LLM_MODEL=scripted",
		"NEKRO_ONEBOT_TOKEN=ob-secret", "NEKRO_ONEBOT_ACTION_TIMEOUT=1s")
	ws1, _, err := dialReverse(srv.Addr, reverseHeaders("ob-secret"))
	if err != nil {
		t.Fatalf("first connection: %v\n%s", err, srv.Logs)
	}
	s1 := newSim(t, ws1)
	s1.logs = srv.Logs
	s1.waitAction("get_login_info")
	ws2, _, err := dialReverse(srv.Addr, reverseHeaders("ob-secret"))
	if err != nil {
		t.Fatalf("second connection: %v\n%s", err, srv.Logs)
	}
	s2 := newSim(t, ws2)
	s2.logs = srv.Logs
	s2.waitAction("get_login_info")
	ws1.Close(websocket.StatusGoingAway, "replaced")
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(srv.Logs.String(), "OneBot connection dropped") {
		if time.Now().After(deadline) {
			t.Fatalf("nekro never saw the first connection end:\n%s", srv.Logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, st := srv.API("GET", "/api/status", nil); !strings.Contains(st, `"connected": true`) {
		t.Fatalf("status after the old connection ended:\n%s", st)
	}
	s2.privateMessage(7, "bob", "ping one")
	if p := parseSend(t, s2.waitAction("send_private_msg")); p.UserID != 7 || p.text() != "pong one" {
		t.Fatalf("answer through the new connection: %+v", p)
	}
	ws2.Close(websocket.StatusNormalClosure, "")
}
