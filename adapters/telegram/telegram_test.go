package telegram_test

// A Telegram Bot API simulator, written from the public documentation
// (core.telegram.org/bots/api: "Making requests", getUpdates, Update,
// Message, MessageEntity, getFile and the file download URL, sendMessage,
// sendPhoto, sendDocument with multipart InputFile, setWebhook and its
// secret_token header, getWebhookInfo, ResponseParameters' retry_after),
// talks to the real `nekro serve` binary with a scripted model. It shares
// no code with the adapter.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

const (
	token    = "4242424242:AAH-sim_Token-for-tests-0123456789"
	botID    = 4242424242
	botName  = "nekko_bot"
	botFirst = "Nekko"
	deadline = 60 * time.Second
)

// call is one Bot API request the simulator received.
type call struct {
	Method string
	At     time.Time
	Params map[string]string
	Files  map[string]upload // multipart InputFiles by field
	Failed bool              // the simulator answered with a scripted failure
}

type upload struct {
	Name string
	Data []byte
}

// failure is a scripted answer to a method's next call: an HTTP status
// with the Bot API's error object, or the connection dropped.
type failure struct {
	status     int
	retryAfter int
	drop       bool
}

// sim is the Bot API: updates queued by the test go out through
// getUpdates (long polling, confirmed by a later offset) and every call
// is recorded.
type sim struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	updates []map[string]any // not yet confirmed
	nextID  int64
	wake    chan struct{}
	calls   []call
	read    map[string]int // per method: calls already returned by next
	fail    map[string][]failure
	files   map[string]simFile // file_id -> file
	webhook string
	secret  string
	msgID   int64
}

type simFile struct {
	path string
	data []byte
}

func newSim(t *testing.T) *sim {
	s := &sim{t: t, nextID: 1000, wake: make(chan struct{}), read: map[string]int{}, fail: map[string][]failure{}, files: map[string]simFile{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sim) serve(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/file/bot"); ok {
		tok, path, _ := strings.Cut(rest, "/")
		s.mu.Lock()
		var data []byte
		for _, f := range s.files {
			if f.path == path {
				data = f.data
			}
		}
		s.mu.Unlock()
		if tok != token || data == nil {
			http.NotFound(w, r)
			return
		}
		w.Write(data)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	tok, method, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		http.NotFound(w, r)
		return
	}
	c := call{Method: method, At: time.Now(), Params: map[string]string{}, Files: map[string]upload{}}
	s.params(r, &c)
	if tok != token {
		s.record(c)
		s.answerError(w, http.StatusUnauthorized, "Unauthorized", 0)
		return
	}
	s.mu.Lock()
	var f *failure
	if q := s.fail[method]; len(q) > 0 {
		f = &q[0]
		s.fail[method] = q[1:]
	}
	s.mu.Unlock()
	if f != nil {
		c.Failed = true
		s.record(c)
		if f.drop {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		desc := map[int]string{409: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
			429: fmt.Sprintf("Too Many Requests: retry after %d", f.retryAfter), 500: "Internal Server Error"}[f.status]
		s.answerError(w, f.status, desc, f.retryAfter)
		return
	}
	if method == "getUpdates" {
		s.confirm(c.Params["offset"])
		s.record(c)
		s.answer(w, s.longPoll(r, c.Params["timeout"]))
		return
	}
	s.record(c)
	switch method {
	case "getMe":
		s.answer(w, map[string]any{"id": botID, "is_bot": true, "first_name": botFirst, "username": botName,
			"can_join_groups": true, "can_read_all_group_messages": false, "supports_inline_queries": false})
	case "getWebhookInfo":
		s.mu.Lock()
		url, pending := s.webhook, len(s.updates)
		s.mu.Unlock()
		s.answer(w, map[string]any{"url": url, "has_custom_certificate": false, "pending_update_count": pending})
	case "deleteWebhook":
		s.mu.Lock()
		s.webhook = ""
		s.mu.Unlock()
		s.answer(w, true)
	case "setWebhook":
		s.mu.Lock()
		s.webhook, s.secret = c.Params["url"], c.Params["secret_token"]
		s.mu.Unlock()
		s.answer(w, true)
	case "getFile":
		s.mu.Lock()
		f, ok := s.files[c.Params["file_id"]]
		s.mu.Unlock()
		if !ok {
			s.answerError(w, http.StatusBadRequest, "Bad Request: invalid file_id", 0)
			return
		}
		s.answer(w, map[string]any{"file_id": c.Params["file_id"], "file_unique_id": "u" + c.Params["file_id"], "file_size": len(f.data), "file_path": f.path})
	case "getChatAdministrators":
		s.answer(w, []any{map[string]any{"status": "creator", "user": map[string]any{"id": 42, "is_bot": false, "first_name": "Alice"}, "is_anonymous": false}})
	case "sendMessage":
		text := c.Params["text"]
		if n := len(utf16.Encode([]rune(text))); n == 0 || n > 4096 {
			s.answerError(w, http.StatusBadRequest, "Bad Request: message is too long", 0)
			return
		}
		s.answer(w, s.sent(c, map[string]any{"text": text}))
	case "sendPhoto", "sendDocument":
		field := map[string]string{"sendPhoto": "photo", "sendDocument": "document"}[method]
		if _, ok := c.Files[field]; !ok {
			s.answerError(w, http.StatusBadRequest, "Bad Request: there is no "+field+" in the request", 0)
			return
		}
		s.answer(w, s.sent(c, map[string]any{}))
	default:
		s.answerError(w, http.StatusNotFound, "Not Found: method not found", 0)
	}
}

// params reads a request's parameters in any of the ways the API takes
// them: query string, urlencoded form, JSON, multipart.
func (s *sim) params(r *http.Request, c *call) {
	for k, v := range r.URL.Query() {
		c.Params[k] = v[0]
	}
	ctype, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ctype {
	case "application/json":
		var m map[string]any
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			s.t.Errorf("%s: a JSON body that does not decode: %v", c.Method, err)
		}
		for k, v := range m {
			if str, ok := v.(string); ok {
				c.Params[k] = str
			} else {
				b, _ := json.Marshal(v)
				c.Params[k] = string(b)
			}
		}
	case "multipart/form-data":
		if err := r.ParseMultipartForm(64 << 20); err != nil {
			s.t.Errorf("%s: multipart body: %v", c.Method, err)
			return
		}
		for k, v := range r.MultipartForm.Value {
			c.Params[k] = v[0]
		}
		for k, fhs := range r.MultipartForm.File {
			f, _ := fhs[0].Open()
			b, _ := io.ReadAll(f)
			f.Close()
			c.Files[k] = upload{Name: fhs[0].Filename, Data: b}
		}
	case "application/x-www-form-urlencoded":
		r.ParseForm()
		for k, v := range r.PostForm {
			c.Params[k] = v[0]
		}
	}
}

func (s *sim) record(c call) {
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
}

func (s *sim) answer(w http.ResponseWriter, result any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result})
}

func (s *sim) answerError(w http.ResponseWriter, status int, desc string, retryAfter int) {
	body := map[string]any{"ok": false, "error_code": status, "description": desc}
	if retryAfter > 0 {
		body["parameters"] = map[string]any{"retry_after": retryAfter}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

// sent is the Message a send method returns.
func (s *sim) sent(c call, extra map[string]any) map[string]any {
	s.mu.Lock()
	s.msgID++
	id := s.msgID
	s.mu.Unlock()
	m := map[string]any{"message_id": id, "date": time.Now().Unix(), "chat": map[string]any{"id": json.RawMessage(c.Params["chat_id"]), "type": "private"},
		"from": map[string]any{"id": botID, "is_bot": true, "first_name": botFirst, "username": botName}}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// confirm forgets the updates below offset, as getUpdates does.
func (s *sim) confirm(offset string) {
	var off int64
	fmt.Sscan(offset, &off)
	s.mu.Lock()
	defer s.mu.Unlock()
	var keep []map[string]any
	for _, u := range s.updates {
		if u["update_id"].(int64) >= off {
			keep = append(keep, u)
		}
	}
	s.updates = keep
}

// longPoll waits until an update is queued (or the timeout passes, or
// the test wakes it) and returns the unconfirmed ones.
func (s *sim) longPoll(r *http.Request, timeout string) []map[string]any {
	var secs int
	fmt.Sscan(timeout, &secs)
	limit := time.After(time.Duration(secs) * time.Second)
	for {
		s.mu.Lock()
		out, wake := append([]map[string]any(nil), s.updates...), s.wake
		s.mu.Unlock()
		if len(out) > 0 || secs == 0 {
			return out
		}
		select {
		case <-wake:
			s.mu.Lock()
			woken := len(s.updates) == 0
			s.mu.Unlock()
			if woken {
				return []map[string]any{} // woken to make way for a scripted failure
			}
		case <-limit:
			return []map[string]any{}
		case <-r.Context().Done():
			return nil
		}
	}
}

func (s *sim) ring() {
	s.mu.Lock()
	close(s.wake)
	s.wake = make(chan struct{})
	s.mu.Unlock()
}

// queue makes msg the next update and returns its update_id.
func (s *sim) queue(msg map[string]any) int64 {
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	s.msgID++
	msg["message_id"] = s.msgID
	msg["date"] = time.Now().Unix()
	s.updates = append(s.updates, map[string]any{"update_id": id, "message": msg})
	s.mu.Unlock()
	s.ring()
	return id
}

// failNext scripts the next calls of method; a waiting long poll returns
// so that the next getUpdates meets the failure.
func (s *sim) failNext(method string, fs ...failure) {
	s.mu.Lock()
	s.fail[method] = append(s.fail[method], fs...)
	s.mu.Unlock()
	s.ring()
}

func (s *sim) addFile(id, path string, data []byte) {
	s.mu.Lock()
	s.files[id] = simFile{path: path, data: data}
	s.mu.Unlock()
}

// next waits for the next successful call of method the test has not
// seen yet.
func (s *sim) next(method string, logs fmt.Stringer) call {
	s.t.Helper()
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		s.mu.Lock()
		seen := 0
		for _, c := range s.calls {
			if c.Method != method || c.Failed {
				continue
			}
			if seen == s.read[method] {
				s.read[method]++
				s.mu.Unlock()
				return c
			}
			seen++
		}
		s.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("nekro never called %s\n%s", method, logs)
	return call{}
}

func (s *sim) all(method string) []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []call
	for _, c := range s.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

func alice() map[string]any {
	return map[string]any{"id": 42, "is_bot": false, "first_name": "Alice", "last_name": "Liddell", "username": "alice", "language_code": "en"}
}

func privateMsg(text string) map[string]any {
	return map[string]any{"from": alice(), "chat": map[string]any{"id": 42, "type": "private", "first_name": "Alice", "username": "alice"}, "text": text}
}

const groupID = -1001234567890

func groupMsg(text string, entities ...map[string]any) map[string]any {
	m := map[string]any{"from": alice(), "chat": map[string]any{"id": groupID, "type": "supergroup", "title": "Tea party"}, "text": text}
	if len(entities) > 0 {
		m["entities"] = entities
	}
	return m
}

// u16 is the length of s in UTF-16 code units, as entity offsets count.
func u16(s string) int { return len(utf16.Encode([]rune(s))) }

func pngBytes(t *testing.T) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	img.Set(1, 1, color.RGBA{R: 200, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func jpegBytes(t *testing.T, w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		img.Set(x, x%h, color.RGBA{G: 180, A: 255})
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

const report = "day,cups\nmon,3\ntue,5\n"

// model answers each kind of message the tests send: the prompt holds
// the whole history, so the phrase written last decides.
func model(t *testing.T, dot []byte) *llmtest.Server {
	replies := map[string]string{
		"draw me a dot": fmt.Sprintf(`import base64
open("/app/shared/dot.png", "wb").write(base64.b64decode("%s"))
send_msg_file(_ck, "/app/shared/dot.png")`, base64.StdEncoding.EncodeToString(dot)),
		"send me the report": fmt.Sprintf(`open("/app/shared/report.csv", "w").write(%q)
send_msg_file(_ck, "/app/shared/report.csv")`, report),
		"look at this":         `send_msg_text(_ck, "image bytes %d" % len(open("/app/uploads/file_big.jpg", "rb").read()))`,
		"read my notes":        `send_msg_text(_ck, "notes say " + open("/app/uploads/notes.txt").read())`,
		"tell me a long story": `send_msg_text(_ck, "x" * 3000 + "\n" + "\U0001F600" * 1500)`,
		"hello there":          `send_msg_text(_ck, "pong group")`,
	}
	for _, n := range []string{"one", "two", "three", "four", "five"} {
		replies["ping "+n] = `send_msg_text(_ck, "pong ` + n + `")`
	}
	m, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		last, best, at := r.Last(), `send_msg_text(_ck, "?")`, -1
		for phrase, code := range replies {
			if i := strings.LastIndex(last, phrase); i > at {
				best, at = code, i
			}
		}
		return llmtest.Code(best)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, logs fmt.Stringer, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(deadline); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s never happened\n%s", what, logs)
		}
	}
}

func serve(t *testing.T, s *sim, m *llmtest.Server, env ...string) *testutil.Served {
	return testutil.Serve(t, testutil.DataDir(t), "api-tok", append([]string{"NEKRO_LLM_BASE_URL=" + m.URL, "NEKRO_LLM_MODEL=scripted",
		"NEKRO_TELEGRAM_API_URL=" + s.srv.URL, "NEKRO_TELEGRAM_BOT_NAMES=Tea Bot", "NEKRO_LOG_LEVEL=info"}, env...)...)
}

// Long polling, end to end: a webhook left from an earlier run is
// removed; a private message is answered; a group message without a
// mention is stored and read by the turn a later @mention (behind emoji,
// so the UTF-16 offsets matter) starts, and a reply to the bot is
// answered; a photo (its largest size) and a document reach the chat's
// uploads; an image and a CSV go out intact; a long text is split within
// the API's limit; a 429 is waited out; failed polls (500, a dropped
// connection, a 409) recover with nothing answered twice; the status
// lists the connection; an API user cannot take a telegram-* chat; the
// token shows nowhere.
func TestPolling(t *testing.T) {
	dot := pngBytes(t)
	m := model(t, dot)
	s := newSim(t)
	s.webhook = "https://old.example.com/hook"
	srv := serve(t, s, m, "NEKRO_TELEGRAM_TOKEN="+token)

	s.next("getMe", srv.Logs)
	s.next("deleteWebhook", srv.Logs)

	// Private: always answered.
	s.queue(privateMsg("ping one"))
	if c := s.next("sendMessage", srv.Logs); c.Params["chat_id"] != "42" || c.Params["text"] != "pong one" || c.Params["parse_mode"] != "" {
		t.Fatalf("private answer: %+v", c.Params)
	}

	// Group: context first, then a mention behind emoji.
	s.queue(groupMsg("just chatting about the weather"))
	prefix := "🌧️☕ "
	text := prefix + "@" + botName + " hello there"
	s.queue(groupMsg(text, map[string]any{"type": "mention", "offset": u16(prefix), "length": u16("@" + botName)}))
	if c := s.next("sendMessage", srv.Logs); c.Params["chat_id"] != fmt.Sprint(groupID) || c.Params["text"] != "pong group" {
		t.Fatalf("group answer: %+v", c.Params)
	}
	groupKey := fmt.Sprintf("telegram-group_%d", groupID)
	reqs := m.RequestsFor(groupKey)
	if len(reqs) != 1 || !reqs[0].Contains("just chatting about the weather") {
		t.Fatalf("the unaddressed message should be in the one turn's prompt, not answered itself: %d requests", len(reqs))
	}
	_, hist := srv.API("GET", "/api/chats/"+groupKey+"/messages", nil)
	if !strings.Contains(hist, `"sender_id": "telegram:42"`) || !strings.Contains(hist, "Alice Liddell (@alice)") {
		t.Fatalf("history:\n%s", hist)
	}

	// A reply to the bot's message, no mention: answered.
	reply := groupMsg("and ping three")
	reply["reply_to_message"] = map[string]any{"message_id": 1, "date": time.Now().Unix(), "text": "pong group",
		"chat": map[string]any{"id": groupID, "type": "supergroup"}, "from": map[string]any{"id": botID, "is_bot": true, "first_name": botFirst, "username": botName}}
	s.queue(reply)
	if c := s.next("sendMessage", srv.Logs); c.Params["text"] != "pong three" {
		t.Fatalf("reply to the bot: %+v", c.Params)
	}

	// A photo in three sizes: the largest reaches /app/uploads.
	big := jpegBytes(t, 64, 48)
	s.addFile("p-small", "photos/file_small.jpg", jpegBytes(t, 8, 6))
	s.addFile("p-mid", "photos/file_mid.jpg", jpegBytes(t, 32, 24))
	s.addFile("p-big", "photos/file_big.jpg", big)
	photo := privateMsg("")
	delete(photo, "text")
	photo["caption"] = "look at this"
	photo["photo"] = []any{
		map[string]any{"file_id": "p-small", "file_unique_id": "us", "width": 8, "height": 6, "file_size": 300},
		map[string]any{"file_id": "p-big", "file_unique_id": "ub", "width": 64, "height": 48, "file_size": len(big)},
		map[string]any{"file_id": "p-mid", "file_unique_id": "um", "width": 32, "height": 24, "file_size": 700},
	}
	s.queue(photo)
	if c, want := s.next("sendMessage", srv.Logs), fmt.Sprintf("image bytes %d", len(big)); c.Params["text"] != want {
		t.Fatalf("photo in: %q, want %q\n%s", c.Params["text"], want, srv.Logs)
	}
	// A document, with its own name.
	s.addFile("d-notes", "documents/file_9.txt", []byte("milk first"))
	doc := privateMsg("")
	delete(doc, "text")
	doc["caption"] = "read my notes"
	doc["document"] = map[string]any{"file_id": "d-notes", "file_unique_id": "un", "file_name": "notes.txt", "mime_type": "text/plain", "file_size": 10}
	s.queue(doc)
	if c := s.next("sendMessage", srv.Logs); c.Params["text"] != "notes say milk first" {
		t.Fatalf("document in: %q\n%s", c.Params["text"], srv.Logs)
	}

	// A photo whose download fails: the turn is told, without the token
	// that is in the file's URL (checked with the log at the end).
	s.addFile("p-gone", "photos/file_gone.jpg", nil)
	gone := privateMsg("")
	delete(gone, "text")
	gone["caption"] = "ping five"
	gone["photo"] = []any{map[string]any{"file_id": "p-gone", "file_unique_id": "ug", "width": 8, "height": 6}}
	s.queue(gone)
	if c := s.next("sendMessage", srv.Logs); c.Params["text"] != "pong five" {
		t.Fatalf("after a failed download: %+v", c.Params)
	}
	if reqs := m.RequestsFor("telegram-private_42"); !reqs[len(reqs)-1].Contains("could not be fetched") || !reqs[len(reqs)-1].Contains("botxxxxx/photos/file_gone.jpg") {
		t.Fatalf("the failed download is not in the prompt, or not as expected:\n%s", reqs[len(reqs)-1].Last())
	}

	// Files out: the image by sendPhoto, the CSV by sendDocument, intact.
	s.queue(privateMsg("draw me a dot"))
	if c := s.next("sendPhoto", srv.Logs); c.Params["chat_id"] != "42" || !bytes.Equal(c.Files["photo"].Data, dot) || c.Files["photo"].Name != "dot.png" {
		t.Fatalf("image out: %+v %q (%d bytes, want %d)", c.Params, c.Files["photo"].Name, len(c.Files["photo"].Data), len(dot))
	}
	s.queue(privateMsg("send me the report"))
	if c := s.next("sendDocument", srv.Logs); string(c.Files["document"].Data) != report || c.Files["document"].Name != "report.csv" {
		t.Fatalf("file out: %q %q", c.Files["document"].Name, c.Files["document"].Data)
	}

	// A long text: split within 4096 UTF-16 units (an emoji is two), at
	// the line break.
	s.queue(privateMsg("tell me a long story"))
	first, second := s.next("sendMessage", srv.Logs), s.next("sendMessage", srv.Logs)
	if first.Params["text"] != strings.Repeat("x", 3000) || second.Params["text"] != strings.Repeat("😀", 1500) {
		t.Fatalf("long text: parts of %d and %d units", u16(first.Params["text"]), u16(second.Params["text"]))
	}

	// A 429: waited out (retry_after), then sent.
	s.failNext("sendMessage", failure{status: http.StatusTooManyRequests, retryAfter: 2})
	s.queue(privateMsg("ping two"))
	sent := s.next("sendMessage", srv.Logs)
	var limited call
	for _, c := range s.all("sendMessage") {
		if c.Failed {
			limited = c
		}
	}
	if sent.Params["text"] != "pong two" || limited.At.IsZero() || sent.At.Sub(limited.At) < 2*time.Second {
		t.Fatalf("after a 429 with retry_after 2: %q sent %s after it", sent.Params["text"], sent.At.Sub(limited.At))
	}

	// Polls fail: a 500, a dropped connection, a 409. Polling recovers,
	// and the message queued meanwhile is answered once.
	s.failNext("getUpdates", failure{status: 500}, failure{drop: true}, failure{status: http.StatusConflict})
	waitFor(t, "three failed polls", srv.Logs, func() bool {
		n := 0
		for _, c := range s.all("getUpdates") {
			if c.Failed {
				n++
			}
		}
		return n == 3
	})
	s.queue(privateMsg("ping four"))
	if c := s.next("sendMessage", srv.Logs); c.Params["text"] != "pong four" {
		t.Fatalf("after failed polls: %+v", c.Params)
	}
	logs := srv.Logs.String()
	for _, want := range []string{"Telegram polling failed", "another program polls this bot", "Telegram polling resumed", "Telegram connected"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not say %q:\n%s", want, logs)
		}
	}

	// Nothing was answered twice.
	counts := map[string]int{}
	for _, c := range s.all("sendMessage") {
		if !c.Failed {
			counts[c.Params["text"]]++
		}
	}
	for text, n := range counts {
		if n != 1 {
			t.Errorf("%q sent %d times", text, n)
		}
	}

	_, st := srv.API("GET", "/api/status", nil)
	for _, want := range []string{`"name": "telegram"`, `"mode": "polling"`, `"connected": true`, fmt.Sprintf(`"self_id": "%d"`, botID)} {
		if !strings.Contains(st, want) {
			t.Fatalf("status lacks %s:\n%s", want, st)
		}
	}

	// An API user cannot create or join a Telegram chat.
	stc, body := srv.API("POST", "/api/users", map[string]string{"user_id": "mallory", "name": "Mallory"})
	var u struct{ Token string }
	if stc != http.StatusCreated || json.Unmarshal([]byte(body), &u) != nil || u.Token == "" {
		t.Fatalf("add user: %d %s", stc, body)
	}
	for _, key := range []string{"telegram-private_777", "telegram-private_42", groupKey} {
		st, body := srv.Call("POST", "/api/chats/"+key+"/messages", u.Token, map[string]string{"text": "mine"})
		if st != http.StatusForbidden || !strings.Contains(body, "telegram adapter") {
			t.Errorf("user token posting to %s: %d %s, want 403 naming the adapter", key, st, body)
		}
	}

	if strings.Contains(srv.Logs.String(), token) || strings.Contains(srv.Logs.String(), strings.Split(token, ":")[1]) {
		t.Errorf("the log shows the token:\n%s", srv.Logs)
	}
	for _, r := range m.Requests() {
		if r.Contains(strings.Split(token, ":")[1]) {
			t.Errorf("the model was shown the token")
		}
	}
}

// A token the API refuses: reported once, clearly, with no token in it;
// getMe is tried again with growing waits, not in a loop; the status and
// `nekro doctor` say why.
func TestWrongToken(t *testing.T) {
	const wrong = "4242424242:AAwrong-token-never-logged"
	m := model(t, nil)
	s := newSim(t)
	srv := serve(t, s, m, "NEKRO_TELEGRAM_TOKEN="+wrong)
	s.next("getMe", srv.Logs)
	start := time.Now()
	// Over eight seconds, waits of 1, 2, 4 s allow four calls at most
	// (fewer on a slow machine); a loop would make hundreds.
	time.Sleep(8 * time.Second)
	calls := s.all("getMe")
	n := 0
	for _, c := range calls {
		if c.At.Before(start.Add(8 * time.Second)) {
			n++
		}
	}
	if n < 2 || n > 5 {
		t.Errorf("%d getMe calls in about 8 s, want 2 to 5 (retried with growing waits)", n)
	}
	logs := srv.Logs.String()
	if c := strings.Count(logs, "Telegram getMe failed"); c != 1 || !strings.Contains(logs, "refused the token") || !strings.Contains(logs, "NEKRO_TELEGRAM_TOKEN") {
		t.Errorf("want one clear error about the token (%d):\n%s", c, logs)
	}
	if strings.Contains(logs, "AAwrong-token") {
		t.Errorf("the log shows the token:\n%s", logs)
	}
	_, st := srv.API("GET", "/api/status", nil)
	if !strings.Contains(st, `"connected": false`) || !strings.Contains(st, "HTTP 401") {
		t.Errorf("status:\n%s", st)
	}

	t.Setenv("NEKRO_TELEGRAM_TOKEN", wrong)
	t.Setenv("NEKRO_TELEGRAM_API_URL", s.srv.URL)
	r := testutil.RunNekro(t, nil, "doctor", "--data", testutil.DataDir(t))
	out := r.Stdout + r.Stderr
	if !strings.Contains(out, "warn telegram: getMe") || !strings.Contains(out, "refused the token") || strings.Contains(out, "AAwrong-token") {
		t.Errorf("doctor:\n%s", out)
	}
	t.Setenv("NEKRO_TELEGRAM_TOKEN", token)
	r = testutil.RunNekro(t, nil, "doctor", "--data", testutil.DataDir(t))
	if out := r.Stdout + r.Stderr; !strings.Contains(out, "ok   telegram: bot @"+botName) {
		t.Errorf("doctor with the right token:\n%s", out)
	}
}

// Webhook mode: nekro sets the webhook with a secret token, and takes
// updates at /telegram/webhook only with that secret; a redelivered
// update is stored once; a chat outside --telegram-chats is ignored.
func TestWebhook(t *testing.T) {
	m := model(t, nil)
	s := newSim(t)
	srv := serve(t, s, m, "NEKRO_TELEGRAM_TOKEN="+token, "NEKRO_TELEGRAM_WEBHOOK_URL=https://bot.example.com/telegram/webhook",
		"NEKRO_TELEGRAM_CHATS=42,"+fmt.Sprint(groupID))
	set := s.next("setWebhook", srv.Logs)
	secret := set.Params["secret_token"]
	if set.Params["url"] != "https://bot.example.com/telegram/webhook" || secret == "" || strings.Contains(secret, "AAH-sim") {
		t.Fatalf("setWebhook: %+v", set.Params)
	}
	post := func(secret string, upd map[string]any) int {
		b, _ := json.Marshal(upd)
		req, _ := http.NewRequest("POST", "http://"+srv.Addr+"/telegram/webhook", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		if secret != "" {
			req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	upd := func(id int64, msg map[string]any) map[string]any {
		msg["message_id"], msg["date"] = id, time.Now().Unix()
		return map[string]any{"update_id": id, "message": msg}
	}
	one := upd(501, privateMsg("ping one"))
	for _, sec := range []string{"", "wrong"} {
		if st := post(sec, one); st != http.StatusUnauthorized {
			t.Fatalf("webhook call with secret %q: %d, want 401", sec, st)
		}
	}
	// Until the webhook is set nekro may answer 503; Telegram retries.
	waitFor(t, "the webhook taking an update", srv.Logs, func() bool { return post(secret, one) == http.StatusOK })
	if c := s.next("sendMessage", srv.Logs); c.Params["text"] != "pong one" {
		t.Fatalf("webhook answer: %+v", c.Params)
	}
	if st := post(secret, one); st != http.StatusOK {
		t.Fatalf("redelivery: %d", st)
	}
	stranger := privateMsg("ping five")
	stranger["chat"] = map[string]any{"id": 43, "type": "private"}
	stranger["from"] = map[string]any{"id": 43, "is_bot": false, "first_name": "Stranger"}
	if st := post(secret, upd(502, stranger)); st != http.StatusOK {
		t.Fatalf("a stranger's update: %d", st)
	}
	if st := post(secret, upd(503, privateMsg("ping two"))); st != http.StatusOK {
		t.Fatalf("second update: %d", st)
	}
	if c := s.next("sendMessage", srv.Logs); c.Params["text"] != "pong two" {
		t.Fatalf("second answer: %+v", c.Params)
	}
	_, hist := srv.API("GET", "/api/chats/telegram-private_42/messages", nil)
	if n := strings.Count(hist, `"text": "ping one"`); n != 1 {
		t.Errorf("the redelivered update was stored %d times:\n%s", n, hist)
	}
	if _, body := srv.API("GET", "/api/chats/telegram-private_43/messages", nil); strings.Contains(body, "ping five") {
		t.Errorf("a chat outside --telegram-chats was stored:\n%s", body)
	}
	if !strings.Contains(srv.Logs.String(), "not in --telegram-chats") {
		t.Errorf("the ignored chat is not logged:\n%s", srv.Logs)
	}
	if len(s.all("getUpdates")) != 0 {
		t.Errorf("webhook mode polled")
	}
	_, st := srv.API("GET", "/api/status", nil)
	if !strings.Contains(st, `"mode": "webhook"`) || !strings.Contains(st, `"connected": true`) {
		t.Errorf("status:\n%s", st)
	}
}
