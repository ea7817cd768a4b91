package server_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// pngCode writes a real 2x2 PNG to /app/shared and sends it to the chat.
const pngCode = `
import struct, zlib
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
raw = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
open("/app/shared/dot.png", "wb").write(png)
open("/app/shared/page.html", "w").write("<script>alert(1)</script>")
send_msg_text(_ck, "hello from the sandbox")
send_msg_file(_ck, "/app/shared/dot.png")
send_msg_file(_ck, "/app/shared/page.html")
`

func TestUIIsServedWithoutTokenAndUploadsNeedOne(t *testing.T) {
	e := startEnv(t, nil, nil)
	resp, err := http.Get(e.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), `<script src="/ui/app.js"`) ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
		t.Fatalf("GET /: %d %q csp %q", resp.StatusCode, page[:min(len(page), 80)], resp.Header.Get("Content-Security-Policy"))
	}
	if resp, err := http.Get(e.base + "/ui/app.js"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /ui/app.js: %v %v", resp, err)
	}

	if st := e.call("POST", "/api/chats/webchat/exec", map[string]string{"code": pngCode, "user_id": "u"}, nil); st != 200 {
		t.Fatalf("exec: %d", st)
	}
	get := func(path, token string) (*http.Response, []byte) {
		req, _ := http.NewRequest("GET", e.base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	// The attachment names come from the history.
	var hist struct {
		Messages []struct {
			Attachments []struct{ Name, Kind string } `json:"attachments"`
		} `json:"messages"`
	}
	e.call("GET", "/api/chats/webchat/messages", nil, &hist)
	names := map[string]string{}
	for _, m := range hist.Messages {
		for _, a := range m.Attachments {
			names[a.Kind] = a.Name
		}
	}
	if names["image"] == "" || names["file"] == "" {
		t.Fatalf("attachments %v", names)
	}
	resp, body := get("/api/chats/webchat/uploads/"+names["image"], testToken)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" || !strings.HasPrefix(string(body), "\x89PNG") {
		t.Errorf("image upload: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// HTML a sandbox wrote never renders in the API's origin.
	resp, _ = get("/api/chats/webchat/uploads/"+names["file"], testToken)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Errorf("html upload served inline: %d %v", resp.StatusCode, resp.Header)
	}
	for path, want := range map[string]int{
		"/api/chats/webchat/uploads/" + names["image"]: http.StatusUnauthorized, // no token
		"/api/chats/webchat/uploads/..%2Fnekro.db":     http.StatusBadRequest,
		"/api/chats/webchat/uploads/missing.png":       http.StatusNotFound,
		"/api/chats/other/uploads/" + names["image"]:   http.StatusNotFound,
	} {
		token := testToken
		if want == http.StatusUnauthorized {
			token = ""
		}
		if resp, _ := get(path, token); resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// The page, in a real headless browser, shows a chat's history with its
// image attachment, from a link carrying the token in its fragment.
func TestUIShowsTheChatInABrowser(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed: make test installs it")
		}
		t.Skip("chromium is not installed (make test installs it)")
	}
	e := startEnv(t, nil, nil)
	if st := e.call("POST", "/api/chats/webchat/exec", map[string]string{"code": pngCode, "user_id": "u"}, nil); st != 200 {
		t.Fatalf("exec: %d", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+filepath.Join(t.TempDir(), "profile"), "--virtual-time-budget=5000", "--dump-dom",
		e.base+"/#token="+testToken+"&chat=webchat")
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	list := regexp.MustCompile(`(?s)<ol id="messages">.*?</ol>`).FindString(string(dom))
	if !strings.Contains(list, "hello from the sandbox") || !regexp.MustCompile(`<img alt="[^"]+\.png" src="blob:`).MatchString(list) {
		t.Errorf("the page does not show the chat:\n%s", list)
	}
}
