package view_image_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

// view_image through the real binary: `nekro exec` runs code that looks
// at images in /app/shared, /app/uploads and on an HTTP server, and the
// operator's vision model is a scripted OpenAI-compatible server given
// to the binary through NEKRO_LLM_VISION_MODEL and _BASE_URL.

type execJSON struct {
	StopType    string `json:"stop_type"`
	Output      string `json:"output"`
	AgentMethod string `json:"agent_method"`
	AgentResult string `json:"agent_result"`
}

func run(t *testing.T, data, code string, args ...string) execJSON {
	t.Helper()
	argv := append([]string{"--data", data, "exec", "--chat", "g1", "--user", "u1", "--json"}, args...)
	r := testutil.RunNekro(t, []byte(code), append(argv, "-")...)
	var res execJSON
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("%v\nstdout %s\nstderr %s", err, r.Stdout, r.Stderr)
	}
	return res
}

// pngOf returns a small PNG of one colour.
func pngOf(t *testing.T, c color.Color, size int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, size, size))
	for x := range size {
		for y := range size {
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func dataURL(b []byte) string { return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b) }

// writeShared is Python that writes b to /app/shared/name.
func writeShared(name string, b []byte) string {
	return "import base64\nopen('/app/shared/" + name + "', 'wb').write(base64.b64decode('" +
		base64.StdEncoding.EncodeToString(b) + "'))\n"
}

// vision is the scripted vision model: it answers with the number of
// images it was shown, and keeps what it was asked.
type vision struct {
	*llmtest.Server
	mu   sync.Mutex
	reqs []llmtest.Request
}

func startVision(t *testing.T) *vision {
	t.Helper()
	v := &vision{}
	s, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		v.mu.Lock()
		v.reqs = append(v.reqs, r)
		v.mu.Unlock()
		return llmtest.Reply{Text: "I see " + strings.Repeat("a square, ", len(r.ImageURLs())) + "nothing else."}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	v.Server = s
	t.Setenv("NEKRO_LLM_VISION_MODEL", "vision-model")
	t.Setenv("NEKRO_LLM_VISION_BASE_URL", s.URL)
	return v
}

func (v *vision) requests() []llmtest.Request {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]llmtest.Request(nil), v.reqs...)
}

// Images from /app/shared, /app/uploads and a URL reach the vision model
// as data: URLs of their exact bytes, with the reference's prompt; its
// answer is the AGENT result.
func TestViewImage(t *testing.T) {
	v := startVision(t)
	data := testutil.DataDir(t)
	red, blue, green := pngOf(t, color.RGBA{255, 0, 0, 255}, 4), pngOf(t, color.RGBA{0, 0, 255, 255}, 5), pngOf(t, color.RGBA{0, 255, 0, 255}, 6)

	res := run(t, data, writeShared("red.png", red)+"view_image(['/app/shared/red.png'])\nprint('not reached')")
	if res.StopType != "AGENT" || res.AgentMethod != "view_image" || strings.Contains(res.Output, "not reached") {
		t.Fatalf("view_image: %+v", res)
	}
	if want := "The visual description of the images is as follows:\nI see a square, nothing else."; res.AgentResult != want {
		t.Errorf("result %q, want %q", res.AgentResult, want)
	}
	reqs := v.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests to the vision model, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Model != "vision-model" {
		t.Errorf("asked model %q, want vision-model", r.Model)
	}
	if got := r.ImageURLs(); len(got) != 1 || got[0] != dataURL(red) {
		t.Errorf("images sent: %.80q, want the PNG's data: URL", got)
	}
	if !r.Contains("Describe the content shown in this images in relatively detailed language.") || !r.Contains("Image 1: /app/shared/red.png") {
		t.Errorf("prompt: %+v", r.Messages)
	}

	// An upload, a relative shared path and a URL, in one call.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.URL.Path {
		case "/green.png":
			w.Write(green)
		case "/page.html":
			w.Write([]byte("<html><body>not an image</body></html>"))
		default:
			http.NotFound(w, req)
		}
	}))
	defer srv.Close()
	t.Setenv(files.AllowPrivateEnv, "1") // the test server is on loopback
	upload := filepath.Join(t.TempDir(), "blue.png")
	if err := os.WriteFile(upload, blue, 0o644); err != nil {
		t.Fatal(err)
	}
	res = run(t, data, "view_image(['/app/uploads/blue.png', 'shared/red.png', '"+srv.URL+"/green.png'])", "--upload", upload)
	if res.StopType != "AGENT" || !strings.HasSuffix(res.AgentResult, "I see a square, a square, a square, nothing else.") {
		t.Fatalf("three images: %+v", res)
	}
	reqs = v.requests()
	r = reqs[len(reqs)-1]
	if got := r.ImageURLs(); len(got) != 3 || got[0] != dataURL(blue) || got[1] != dataURL(red) || got[2] != dataURL(green) {
		t.Errorf("images sent: %.80q", got)
	}
	for _, s := range []string{"Image 1: /app/uploads/blue.png", "Image 2: shared/red.png", "Image 3: " + srv.URL + "/green.png"} {
		if !r.Contains(s) {
			t.Errorf("the prompt lacks %q", s)
		}
	}

	// Refusals: nothing more reaches the vision model.
	before := len(v.requests())
	for _, c := range []struct{ code, want string }{
		{"view_image([])", "images is empty"},
		{"view_image('/app/shared/red.png')", "argument 'images' must be list"},
		{"view_image(['/app/shared/missing.png'])", "cannot open the image /app/shared/missing.png"},
		{"view_image(['/app/shared/../../../../etc/passwd'])", "cannot open the image /app/shared/../../../../etc/passwd: path refused"},
		{"view_image(['/etc/hostname'])", "cannot open the image /etc/hostname: path refused"},
		{"import os\nos.symlink('/etc/passwd', '/app/shared/link.png')\nview_image(['/app/shared/link.png'])", "cannot open the image /app/shared/link.png"},
		{"open('/app/shared/notes.txt', 'w').write('just text, no picture at all')\nview_image(['/app/shared/notes.txt'])", "/app/shared/notes.txt is not an image (its content looks like text/plain"},
		{"view_image(['" + srv.URL + "/page.html'])", "/page.html is not an image (its content looks like text/html"},
		{"view_image(['" + srv.URL + "/missing.png'])", "404"},
		{"view_image(['ftp://example.com/a.png'])", "ftp://example.com/a.png"},
		{"view_image(['/app/shared/red.png'] * 9)", "9 images at once is too many: at most 8"},
	} {
		res := run(t, data, c.code)
		if res.StopType != "ERROR" || !strings.Contains(res.Output, c.want) {
			t.Errorf("%s: want an error with %q, got %+v", c.code, c.want, res)
		}
		if strings.Contains(res.Output, "root:") {
			t.Errorf("%s leaked a host file:\n%s", c.code, res.Output)
		}
	}
	if n := len(v.requests()); n != before {
		t.Errorf("refused calls asked the vision model %d times", n-before)
	}

	// The operator's size cap.
	if r := testutil.RunNekro(t, nil, "--data", data, "plugins", "config", "nekro.view_image", "--set", "max_image_bytes=1024"); r.Code != 0 {
		t.Fatalf("plugins config: %+v", r)
	}
	res = run(t, data, writeShared("big.png", append(red, make([]byte, 2048)...))+"view_image(['/app/shared/big.png'])")
	if res.StopType != "ERROR" || !strings.Contains(res.Output, "the image /app/shared/big.png is larger than 1024 bytes") {
		t.Errorf("over the cap: %+v", res)
	}
	if n := len(v.requests()); n != before {
		t.Errorf("an image over the cap reached the vision model")
	}
}

// A URL is fetched by the host's guarded downloader: a private address is
// refused unless the operator allows it.
func TestURLsAreGuarded(t *testing.T) {
	v := startVision(t)
	data := testutil.DataDir(t)
	hits := 0
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		w.Write(pngOf(t, color.White, 2))
	}))
	defer srv.Close()
	t.Setenv(files.AllowPrivateEnv, "")
	res := run(t, data, "view_image(['"+srv.URL+"/white.png'])")
	if res.StopType != "ERROR" || !strings.Contains(res.Output, "address is not public") {
		t.Errorf("a loopback URL: %+v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if hits != 0 || len(v.requests()) != 0 {
		t.Errorf("the private server was reached (%d) or the model asked (%d)", hits, len(v.requests()))
	}
}

// Without a vision model group, view_image says how to configure one.
func TestNoVisionGroup(t *testing.T) {
	t.Setenv("NEKRO_LLM_VISION_MODEL", "")
	data := testutil.DataDir(t)
	res := run(t, data, writeShared("red.png", pngOf(t, color.Black, 2))+"view_image(['/app/shared/red.png'])")
	if res.StopType != "ERROR" || !strings.Contains(res.Output, `no model group "vision" is configured (set NEKRO_LLM_VISION_MODEL)`) {
		t.Errorf("no vision group: %+v", res)
	}
}
