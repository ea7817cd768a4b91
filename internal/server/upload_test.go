package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

// part is one part of a multipart message: a field (no file name) or a
// file.
type part struct {
	field    string
	filename string // sent as is, hostile names included
	isFile   bool
	content  []byte
}

func field(name, value string) part { return part{field: name, content: []byte(value)} }
func file(name string, content []byte) part {
	return part{field: "file", filename: name, isFile: true, content: content}
}

// postMultipart posts parts to the chat as multipart/form-data and
// returns the status and the decoded answer.
func postMultipart(t *testing.T, s *testutil.Served, chatKey string, parts ...part) (int, postAnswer) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		if p.isFile {
			// Written by hand, so names a client would escape go as they are.
			if strings.ContainsRune(p.filename, 0) {
				// A raw NUL ends the part's headers as malformed (400);
				// RFC 2231's encoding carries one into the name.
				h.Set("Content-Disposition", `form-data; name="file"; filename*=UTF-8''`+url.PathEscape(p.filename))
			} else {
				h.Set("Content-Disposition", `form-data; name="file"; filename="`+p.filename+`"`)
			}
			h.Set("Content-Type", "application/octet-stream")
		} else {
			h.Set("Content-Disposition", `form-data; name="`+p.field+`"`)
		}
		w, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(p.content)
	}
	mw.Close()
	req, _ := http.NewRequest("POST", "http://"+s.Addr+"/api/chats/"+chatKey+"/messages", &body)
	req.Header.Set("Authorization", "Bearer "+s.Token)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var a postAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("answer %d %s: %v", resp.StatusCode, raw, err)
	}
	return resp.StatusCode, a
}

type postAnswer struct {
	Message *chat.Message `json:"message"`
	Error   string        `json:"error"`
}

func pngBytes(t *testing.T) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 4, 3))
	img.Set(1, 1, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// historyOf returns one page of the chat's history through the API.
func historyOf(t *testing.T, s *testutil.Served, chatKey, query string) (int, []chat.Message, any) {
	t.Helper()
	st, body := s.API("GET", "/api/chats/"+chatKey+"/messages"+query, nil)
	var out struct {
		Messages   []chat.Message `json:"messages"`
		NextBefore any            `json:"next_before"`
	}
	if st == http.StatusOK {
		if err := json.Unmarshal([]byte(body), &out); err != nil {
			t.Fatalf("history: %s: %v", body, err)
		}
	}
	return st, out.Messages, out.NextBefore
}

// A user sends a text file and an image with a message: both are stored
// in the chat's uploads, listed as attachments, shown to the model with
// their sandbox paths, readable by the turn's code at those paths and
// downloadable through the API.
func TestUploadedFilesReachTheModelAndTheSandbox(t *testing.T) {
	model, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		if !r.Contains("/app/uploads/notes.txt") {
			return llmtest.Code(`send_msg_text(_ck, "no file in my prompt")`)
		}
		return llmtest.Code(`
text = open("/app/uploads/notes.txt").read()
img = open("/app/uploads/pic.png", "rb").read()
send_msg_text(_ck, f"notes say {text!r}; the image has {len(img)} bytes and starts {img[1:4].decode()}")`)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	data := testutil.DataDir(t)
	s := testutil.Serve(t, data, "tok-upload", "NEKRO_LLM_BASE_URL="+model.URL, "NEKRO_LLM_MODEL=scripted")

	img := pngBytes(t)
	st, a := postMultipart(t, s, "files", field("user_id", "u1"), field("user_name", "Ann"),
		field("text", "please read my files"), file("notes.txt", []byte("milk and eggs")), file("pic.png", img))
	if st != http.StatusAccepted || a.Message == nil {
		t.Fatalf("post: %d %+v", st, a)
	}
	atts := a.Message.Attachments
	if len(atts) != 2 || atts[0].Kind != "file" || atts[0].Path != "/app/uploads/notes.txt" || atts[0].Size != 13 ||
		atts[1].Kind != "image" || atts[1].Path != "/app/uploads/pic.png" || atts[1].MIME != "image/png" || atts[1].Size != int64(len(img)) {
		t.Fatalf("attachments: %+v", atts)
	}

	want := fmt.Sprintf("notes say 'milk and eggs'; the image has %d bytes and starts PNG", len(img))
	var hist []chat.Message
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, hist, _ = historyOf(t, s, "files", "")
		if len(hist) > 0 && hist[len(hist)-1].Text == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer %q; history %s\n%s", want, strings.Join(texts(hist), "\n"), s.Logs)
		}
	}
	if len(hist[0].Attachments) != 2 || hist[0].Attachments[1].Name != "pic.png" {
		t.Fatalf("the history lost the attachments: %+v", hist[0])
	}
	prompt := model.RequestsFor("files")[0].Last()
	mustContain(t, "prompt", prompt, "[file attachment: /app/uploads/notes.txt (text/plain; charset=utf-8, 13 bytes)]")
	mustContain(t, "prompt", prompt, fmt.Sprintf("[image attachment: /app/uploads/pic.png (image/png, %d bytes)]", len(img)))

	if st, body := s.API("GET", "/api/chats/files/uploads/notes.txt", nil); st != http.StatusOK || body != "milk and eggs" {
		t.Fatalf("download: %d %q", st, body)
	}

	// A second file of the same name gets its own name; a message of
	// files alone needs no text; JSON posts work as before.
	st, a = postMultipart(t, s, "files", field("user_id", "u1"), file("notes.txt", []byte("second")))
	if st != http.StatusAccepted || a.Message.Text != "" || a.Message.Attachments[0].Name != "notes-1.txt" {
		t.Fatalf("files only: %d %+v", st, a)
	}
	if st, body := s.API("POST", "/api/chats/files/messages", map[string]string{"user_id": "u1", "text": "plain"}); st != http.StatusAccepted {
		t.Fatalf("JSON post: %d %s", st, body)
	}
}

// Hostile file names are made into one safe name each: the files land in
// the chat's uploads, nowhere else, and download under those names.
func TestUploadHostileNames(t *testing.T) {
	data := testutil.DataDir(t)
	model, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply { return llmtest.Code(`pass`) })
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	s := testutil.Serve(t, data, "tok-names", "NEKRO_LLM_BASE_URL="+model.URL, "NEKRO_LLM_MODEL=scripted")
	long := strings.Repeat("x", 300) + ".txt"
	names := []string{"../../etc/passwd", "", "a\x00b.txt", long, "..", `..\..\win.ini`, "/abs/path.txt"}
	var parts []part
	parts = append(parts, field("user_id", "mallory"))
	for i, n := range names {
		parts = append(parts, file(n, []byte(fmt.Sprint("content ", i))))
	}
	st, a := postMultipart(t, s, "hostile", parts...)
	if st != http.StatusAccepted || a.Message == nil || len(a.Message.Attachments) != len(names) {
		t.Fatalf("post: %d %+v", st, a)
	}
	for i, at := range a.Message.Attachments {
		if at.Name == "" || at.Name == "." || at.Name == ".." || strings.ContainsAny(at.Name, "/\x00") || len(at.Name) > 255 ||
			at.Path != "/app/uploads/"+at.Name {
			t.Errorf("%q stored as %+v", names[i], at)
			continue
		}
		st, body := s.API("GET", "/api/chats/hostile/uploads/"+url.PathEscape(at.Name), nil)
		if st != http.StatusOK || body != fmt.Sprint("content ", i) {
			t.Errorf("%q (stored as %q) downloads as %d %q", names[i], at.Name, st, body)
		}
	}
	if passwd, _ := s.API("GET", "/api/chats/hostile/uploads/..%2F..%2Fetc%2Fpasswd", nil); passwd == http.StatusOK {
		t.Error("a path leaving the uploads was served")
	}
}

// A file named with bidi controls and other invisible characters, so that
// "\u202egnp.exe" shows as "exe.png", is stored under its visible
// characters only: the name in the history, the prompt's path, and the
// name it downloads by hold none of them.
func TestUploadNameLosesBidiControls(t *testing.T) {
	data := testutil.DataDir(t)
	model, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply { return llmtest.Code(`pass`) })
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	s := testutil.Serve(t, data, "tok-bidi", "NEKRO_LLM_BASE_URL="+model.URL, "NEKRO_LLM_MODEL=scripted")
	names := map[string]string{
		"\u202egnp.exe": "gnp.exe",
		"a\u202ab\u202bc\u202cd\u202de\u200ef\u200fg.txt": "abcdefg.txt",
		"\u2066x\u2067y\u2068z\u2069\u061c.pdf":           "xyz.pdf",
		"zero\u200bwidth\ufeff.txt":                       "zerowidth.txt",
	}
	var order []string
	parts := []part{field("user_id", "mallory")}
	for n := range names {
		order = append(order, n)
		parts = append(parts, file(n, []byte("payload "+names[n])))
	}
	st, a := postMultipart(t, s, "bidi", parts...)
	if st != http.StatusAccepted || a.Message == nil || len(a.Message.Attachments) != len(order) {
		t.Fatalf("post: %d %+v", st, a)
	}
	_, hist, _ := historyOf(t, s, "bidi", "")
	if len(hist) == 0 {
		t.Fatal("the message is not in the history")
	}
	for i, at := range hist[0].Attachments {
		want := names[order[i]]
		if at.Name != want || at.Path != "/app/uploads/"+want {
			t.Errorf("%+q stored as %+q (path %+q), want %q", order[i], at.Name, at.Path, want)
		}
		st, body := s.API("GET", "/api/chats/bidi/uploads/"+url.PathEscape(want), nil)
		if st != http.StatusOK || body != "payload "+want {
			t.Errorf("%+q does not download as %q: %d %q", order[i], want, st, body)
		}
	}
}

// The per-file and per-message limits (set here through the environment
// of nekro serve) answer 413 naming the limit and its flag, with nothing
// stored: no message, no file. Too many files are 400, a full uploads
// volume 507 naming --shared-quota.
func TestUploadLimits(t *testing.T) {
	data := testutil.DataDir(t)
	model, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply { return llmtest.Code(`pass`) })
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	s := testutil.Serve(t, data, "tok-limits", "NEKRO_LLM_BASE_URL="+model.URL, "NEKRO_LLM_MODEL=scripted",
		"NEKRO_UPLOAD_MAX_FILE=1KiB", "NEKRO_UPLOAD_MAX_MESSAGE=1536", "NEKRO_SHARED_QUOTA=4MiB")
	kib := bytes.Repeat([]byte("k"), 1024)

	st, a := postMultipart(t, s, "lim", field("user_id", "u1"), file("small.txt", []byte("ok")), file("big.bin", append(kib, 'x')))
	if st != http.StatusRequestEntityTooLarge || !strings.Contains(a.Error, "1KiB limit of one file (--upload-max-file)") {
		t.Fatalf("file over its limit: %d %+v", st, a)
	}
	st, a = postMultipart(t, s, "lim", field("user_id", "u1"), file("one.bin", kib), file("two.bin", kib), field("text", "hi"))
	if st != http.StatusRequestEntityTooLarge || !strings.Contains(a.Error, "1536 bytes limit of one message's files together (--upload-max-message)") {
		t.Fatalf("message over its limit: %d %+v", st, a)
	}
	var many []part
	for i := range 33 {
		many = append(many, file(fmt.Sprint("f", i), []byte("x")))
	}
	st, a = postMultipart(t, s, "lim", append(many, field("user_id", "u1"))...)
	if st != http.StatusBadRequest || !strings.Contains(a.Error, "at most 32") {
		t.Fatalf("33 files: %d %+v", st, a)
	}
	st, a = postMultipart(t, s, "lim", field("user_id", "u1"), field("user_id", "u2"), file("a.txt", []byte("x")))
	if st != http.StatusBadRequest {
		t.Fatalf("a field twice: %d %+v", st, a)
	}
	// Nothing of the refused messages was kept.
	if _, hist, _ := historyOf(t, s, "lim", ""); len(hist) != 0 {
		t.Fatalf("refused messages were stored: %s", strings.Join(texts(hist), "\n"))
	}
	for _, name := range []string{"small.txt", "big.bin", "one.bin", "two.bin", "f0", "a.txt"} {
		if st, _ := s.API("GET", "/api/chats/lim/uploads/"+name, nil); st != http.StatusNotFound {
			t.Errorf("%s of a refused message: %d, want 404", name, st)
		}
	}

	// A full uploads volume: files within the message limits do not fit
	// into a 4 MiB volume.
	s.Stop()
	s = testutil.Serve(t, data, "tok-limits", "NEKRO_LLM_BASE_URL="+model.URL, "NEKRO_LLM_MODEL=scripted",
		"NEKRO_UPLOAD_MAX_FILE=8MiB", "NEKRO_UPLOAD_MAX_MESSAGE=16MiB", "NEKRO_SHARED_QUOTA=4MiB")
	big := bytes.Repeat([]byte("z"), 6<<20)
	st, a = postMultipart(t, s, "full", field("user_id", "u1"), file("big.bin", big))
	if st != http.StatusInsufficientStorage || !strings.Contains(a.Error, "--shared-quota") {
		t.Fatalf("full uploads: %d %+v", st, a)
	}
	if _, hist, _ := historyOf(t, s, "full", ""); len(hist) != 0 {
		t.Fatalf("a message whose file did not fit was stored: %s", strings.Join(texts(hist), "\n"))
	}
	st, a = postMultipart(t, s, "full", field("user_id", "u1"), file("fits.txt", []byte("after the failure, space is free again")))
	if st != http.StatusAccepted {
		t.Fatalf("a small file after a full volume: %d %+v", st, a)
	}
}

// Messages, turns and runs page through nekro serve: 250 messages in
// pages of 100, 100 and 50, each oldest first, next_before leading to the
// older page and null after the oldest; the default page is the newest
// 100; bad values are 400.
func TestHistoryPaging(t *testing.T) {
	data := testutil.DataDir(t)
	ctx := context.Background()
	a, err := app.Open(ctx, app.Config{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 250 {
		if _, err := a.Chats.AddMessage(ctx, chat.Message{ChatKey: "long", Role: chat.User, SenderID: "u", Text: fmt.Sprint("m", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if err := a.Chats.RecordRun(ctx, chat.Run{RunID: fmt.Sprint("run-", i), ChatKey: "long", StopType: "NORMAL"}); err != nil {
			t.Fatal(err)
		}
	}
	a.Close(ctx)
	s := testutil.Serve(t, data, "tok-pages")

	var all []string
	var sizes []int
	query := "?limit=100"
	for range 5 {
		st, page, next := historyOf(t, s, "long", query)
		if st != http.StatusOK {
			t.Fatalf("page %s: %d", query, st)
		}
		sizes = append(sizes, len(page))
		var texts []string
		for _, m := range page {
			texts = append(texts, m.Text)
		}
		all = append(texts, all...)
		if next == nil {
			break
		}
		query = fmt.Sprintf("?limit=100&before=%v", next)
	}
	if fmt.Sprint(sizes) != "[100 100 50]" || len(all) != 250 || all[0] != "m0" || all[249] != "m249" {
		t.Fatalf("pages of %v; first %q last %q", sizes, all[0], all[len(all)-1])
	}
	for i, text := range all {
		if text != fmt.Sprint("m", i) {
			t.Fatalf("message %d is %q: pages overlap or leave gaps", i, text)
		}
	}
	if _, page, next := historyOf(t, s, "long", ""); len(page) != 100 || page[0].Text != "m150" || next == nil {
		t.Fatalf("default page: %d messages from %q, next %v", len(page), page[0].Text, next)
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?limit=ten", "?before=abc", "?before=-1", "?before="} {
		if st, _, _ := historyOf(t, s, "long", q); st != http.StatusBadRequest {
			t.Errorf("messages%s: %d, want 400", q, st)
		}
	}
	st, body := s.API("GET", "/api/chats/long/runs?limit=2", nil)
	var runs struct {
		Runs       []chat.Run `json:"runs"`
		NextBefore any        `json:"next_before"`
	}
	json.Unmarshal([]byte(body), &runs)
	if st != http.StatusOK || len(runs.Runs) != 2 || runs.Runs[1].RunID != "run-2" || runs.NextBefore != "run-1" {
		t.Fatalf("runs page: %d %s", st, body)
	}
	st, body = s.API("GET", "/api/chats/long/runs?limit=2&before=run-1", nil)
	json.Unmarshal([]byte(body), &runs)
	if st != http.StatusOK || len(runs.Runs) != 1 || runs.Runs[0].RunID != "run-0" || runs.NextBefore != nil {
		t.Fatalf("older runs page: %d %s", st, body)
	}
	if st, _ := s.API("GET", "/api/chats/long/runs?before=no-such-run", nil); st != http.StatusBadRequest {
		t.Errorf("runs before an unknown run: %d, want 400", st)
	}
	if st, body := s.API("GET", "/api/chats/long/turns?limit=5", nil); st != http.StatusOK || !strings.Contains(body, `"next_before": null`) {
		t.Errorf("turns page: %d %s", st, body)
	}
}
