package files

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nekro-go/nekro/plugin"
)

// pngHeader is enough of a PNG for content sniffing.
var pngHeader = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")

// sharedEntries lists the shared directory, failing on a partial file.
func sharedEntries(t *testing.T, fsys *FS) []string {
	t.Helper()
	ents, err := os.ReadDir(fsys.SharedPath())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), partialPrefix) {
			t.Errorf("partial file %s left in the shared directory", e.Name())
		}
		names = append(names, e.Name())
	}
	return names
}

func readShared(t *testing.T, fsys *FS, sandboxPath string) string {
	t.Helper()
	b, err := fsys.ReadFile(sandboxPath)
	if err != nil {
		t.Fatalf("read back %s: %v", sandboxPath, err)
	}
	return string(b)
}

func TestMixedForwardBytesAndDataURIs(t *testing.T) {
	fsys, _ := newTestFS(t, "chat-1", Options{})
	ctx := context.Background()

	sp, err := fsys.MixedForwardFile(ctx, []byte(`{"a":1}`), "result.json")
	if err != nil || sp != "/app/shared/result.json" || readShared(t, fsys, sp) != `{"a":1}` {
		t.Fatalf("bytes: %q, %v", sp, err)
	}
	// Replaces an earlier file of the same name.
	if sp, err = fsys.MixedForwardFile(ctx, []byte("v2"), "result.json"); err != nil || readShared(t, fsys, sp) != "v2" {
		t.Fatalf("bytes again: %q, %v", sp, err)
	}
	// No name: a content hash with a sniffed extension.
	sp, err = fsys.MixedForwardFile(ctx, pngHeader, "")
	if err != nil || !strings.HasPrefix(sp, "/app/shared/") || !strings.HasSuffix(sp, ".png") {
		t.Fatalf("unnamed png bytes: %q, %v", sp, err)
	}
	sp2, _ := fsys.MixedForwardFile(ctx, pngHeader, "")
	if sp2 != sp {
		t.Errorf("same content got two names: %q, %q", sp, sp2)
	}
	// A hostile name becomes one entry in /app/shared.
	sp, err = fsys.MixedForwardFile(ctx, []byte("x"), "../../../plugins/a.b/evil.py")
	if err != nil || sp != "/app/shared/.._.._.._plugins_a.b_evil.py" {
		t.Fatalf("hostile name: %q, %v", sp, err)
	}
	if _, err := fsys.MixedForwardFile(ctx, []byte("x"), ".."); !errors.Is(err, plugin.ErrPathRefused) {
		t.Errorf("name \"..\": %v, want a refusal", err)
	}

	uri := "data:image/png;base64," + base64.StdEncoding.EncodeToString(pngHeader)
	sp, err = fsys.MixedForwardFile(ctx, uri, "")
	if err != nil || !strings.HasSuffix(sp, ".png") || readShared(t, fsys, sp) != string(pngHeader) {
		t.Fatalf("data: base64: %q, %v", sp, err)
	}
	sp, err = fsys.MixedForwardFile(ctx, "data:text/plain;charset=utf-8,hello%20world", "hello.txt")
	if err != nil || readShared(t, fsys, sp) != "hello world" {
		t.Fatalf("data: text: %q, %v", sp, err)
	}
	if _, err := fsys.MixedForwardFile(ctx, "data:image/png;base64,!!!notbase64", "bad.png"); err == nil {
		t.Error("bad base64 accepted")
	}
	small, _ := newTestFS(t, "chat-2", Options{MaxDownloadBytes: 10})
	big := "data:application/octet-stream;base64," + base64.StdEncoding.EncodeToString(make([]byte, 100))
	if _, err := small.MixedForwardFile(ctx, big, "big.bin"); err == nil || !strings.Contains(err.Error(), "10-byte limit") {
		t.Errorf("oversized data: URI: %v, want the limit named", err)
	}
	if names := sharedEntries(t, small); len(names) != 0 {
		t.Errorf("oversized data: URI left %v", names)
	}

	// Readers stream; other types are refused clearly.
	sp, err = fsys.MixedForwardFile(ctx, strings.NewReader("streamed"), "s.txt")
	if err != nil || readShared(t, fsys, sp) != "streamed" {
		t.Fatalf("reader: %q, %v", sp, err)
	}
	if _, err := fsys.MixedForwardFile(ctx, 42, "x"); err == nil || !strings.Contains(err.Error(), "unsupported source type int") {
		t.Errorf("int source: %v", err)
	}
	sharedEntries(t, fsys)
}

func TestMixedForwardHostFiles(t *testing.T) {
	fsys, l := newTestFS(t, "chat-1", Options{})
	ctx := context.Background()
	dir, err := l.EnsurePluginDir("alice.notes")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "exports", "data.csv"), "a,b\n1,2\n")
	pfs := fsys.ForPlugin("alice.notes")

	sp, err := pfs.MixedForwardFile(ctx, filepath.Join(dir, "exports", "data.csv"), "")
	if err != nil || sp != "/app/shared/data.csv" || readShared(t, fsys, sp) != "a,b\n1,2\n" {
		t.Fatalf("plugin file: %q, %v", sp, err)
	}
	sp, err = pfs.MixedForwardFile(ctx, filepath.Join(dir, "exports", "data.csv"), "renamed.csv")
	if err != nil || sp != "/app/shared/renamed.csv" {
		t.Fatalf("plugin file renamed: %q, %v", sp, err)
	}
	f, err := os.Open(filepath.Join(dir, "exports", "data.csv"))
	if err != nil {
		t.Fatal(err)
	}
	sp, err = pfs.MixedForwardFile(ctx, f, "")
	f.Close()
	if err != nil || sp != "/app/shared/data.csv" {
		t.Fatalf("*os.File: %q, %v", sp, err)
	}
	// Already in shared or uploads: no copy, same answer as ForwardFile.
	writeFile(t, filepath.Join(fsys.UploadPath(), "in.txt"), "up")
	sp, err = pfs.MixedForwardFile(ctx, filepath.Join(fsys.UploadPath(), "in.txt"), "ignored.txt")
	if err != nil || sp != "/app/uploads/in.txt" {
		t.Fatalf("upload file: %q, %v", sp, err)
	}
	for _, src := range []string{"/etc/passwd", "relative/path.txt", "/proc/self/environ", filepath.Join(l.Root, "nekro.db")} {
		if sp, err := pfs.MixedForwardFile(ctx, src, ""); !errors.Is(err, plugin.ErrPathRefused) {
			t.Errorf("MixedForwardFile(%q) = %q, %v; want a refusal", src, sp, err)
		}
	}
}

func TestDownloads(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/img/cat.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write(pngHeader)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/img/cat.png", http.StatusFound)
	})
	mux.HandleFunc("/missing", http.NotFound)
	mux.HandleFunc("/big-chunked", func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for range 64 { // 4 MiB, no Content-Length
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/big-sized", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(4<<20))
		w.Write(make([]byte, 4<<20))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("start"))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx := context.Background()
	fsys, _ := newTestFS(t, "chat-1", Options{AllowPrivateNetworks: true, MaxDownloadBytes: 1 << 20, DownloadTimeout: 300 * time.Millisecond})

	sp, err := fsys.MixedForwardFile(ctx, srv.URL+"/img/cat.png", "")
	if err != nil || sp != "/app/shared/cat.png" || readShared(t, fsys, sp) != string(pngHeader) {
		t.Fatalf("download: %q, %v", sp, err)
	}
	sp, err = fsys.MixedForwardFile(ctx, srv.URL+"/", "")
	if err != nil || !strings.HasPrefix(sp, "/app/shared/download-") || !strings.HasSuffix(sp, ".json") {
		t.Fatalf("download without a file name: %q, %v", sp, err)
	}
	sp, err = fsys.MixedForwardFile(ctx, srv.URL+"/redirect", "image.png")
	if err != nil || sp != "/app/shared/image.png" || readShared(t, fsys, sp) != string(pngHeader) {
		t.Fatalf("redirected download: %q, %v", sp, err)
	}
	var buf bytes.Buffer
	if n, err := fsys.Download(ctx, srv.URL+"/img/cat.png", &buf); err != nil || n != int64(len(pngHeader)) {
		t.Fatalf("Download = %d, %v", n, err)
	}
	before := sharedEntries(t, fsys)

	if _, err := fsys.MixedForwardFile(ctx, srv.URL+"/missing", "m.txt"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("404: %v", err)
	}
	_, err = fsys.MixedForwardFile(ctx, srv.URL+"/big-chunked", "big.bin")
	if err == nil || !strings.Contains(err.Error(), "stopped at the 1048576-byte limit") {
		t.Errorf("oversized chunked download: %v", err)
	}
	_, err = fsys.MixedForwardFile(ctx, srv.URL+"/big-sized", "big.bin")
	if err == nil || !strings.Contains(err.Error(), "over the 1048576-byte limit") {
		t.Errorf("oversized download with Content-Length: %v", err)
	}
	start := time.Now()
	_, err = fsys.MixedForwardFile(ctx, srv.URL+"/slow", "slow.txt")
	if err == nil || !strings.Contains(err.Error(), "timed out after 300ms") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow download: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("slow download took %s, want about the 300ms timeout", d)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := fsys.MixedForwardFile(cctx, srv.URL+"/img/cat.png", "c.png"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	for _, u := range []string{"http://", "http:///x", "https://user:pw@[::1", "ftp://x/y"} {
		if _, err := fsys.Download(ctx, u, io.Discard); err == nil {
			t.Errorf("Download(%q) succeeded", u)
		}
	}
	if after := sharedEntries(t, fsys); len(after) != len(before) {
		t.Errorf("failed downloads left files: before %v, after %v", before, after)
	}
}

func TestDownloadRefusesPrivateAddressesByDefault(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "internal secret")
	}))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	fsys, _ := newTestFS(t, "chat-1", Options{})
	ctx := context.Background()
	for _, u := range []string{
		srv.URL + "/x",                      // 127.0.0.1
		"http://localhost:" + port + "/x",   // a name resolving to loopback
		"http://[::ffff:127.0.0.1]:" + port, // IPv4-mapped
		"http://0.0.0.0:" + port + "/x",
	} {
		_, err := fsys.MixedForwardFile(ctx, u, "leak.txt")
		if !errors.Is(err, ErrPrivateAddress) || !strings.Contains(err.Error(), AllowPrivateEnv) {
			t.Errorf("MixedForwardFile(%q): %v; want a private-address refusal naming %s", u, err, AllowPrivateEnv)
		}
		if _, err := fsys.Download(ctx, u, io.Discard); !errors.Is(err, ErrPrivateAddress) {
			t.Errorf("Download(%q): %v; want a private-address refusal", u, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server was reached %d times", n)
	}
	if names := sharedEntries(t, fsys); len(names) != 0 {
		t.Errorf("refused downloads left %v", names)
	}
}

func TestPublicAddr(t *testing.T) {
	for s, want := range map[string]bool{
		"8.8.8.8": true, "1.1.1.1": true, "2606:4700:4700::1111": true, "93.184.216.34": true,
		"127.0.0.1": false, "127.8.9.10": false, "::1": false, "0.0.0.0": false, "::": false,
		"10.0.0.1": false, "172.16.5.4": false, "192.168.1.1": false, "fd00::1": false,
		"169.254.169.254": false, "fe80::1": false, "100.64.0.1": false, "224.0.0.1": false,
		"ff02::1": false, "255.255.255.255": false, "::ffff:127.0.0.1": false, "::ffff:10.0.0.1": false,
		"64:ff9b::a00:1": false, "2002:7f00:1::": false, "198.18.0.1": false, "240.0.0.1": false,
		"192.0.2.1": false,
	} {
		if got := PublicAddr(netip.MustParseAddr(s)); got != want {
			t.Errorf("PublicAddr(%s) = %v, want %v", s, got, want)
		}
	}
}

// Forwarding streams: the memory it allocates does not grow with the file.
func TestMixedForwardMemoryIsFlat(t *testing.T) {
	fsys, l := newTestFS(t, "chat-1", Options{})
	dir, err := l.EnsurePluginDir("alice.big")
	if err != nil {
		t.Fatal(err)
	}
	pfs := fsys.ForPlugin("alice.big")
	allocFor := func(size int64) uint64 {
		src := filepath.Join(dir, fmt.Sprintf("f%d.bin", size))
		f, err := os.Create(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		f.Close()
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		if _, err := pfs.MixedForwardFile(context.Background(), src, ""); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&m1)
		return m1.TotalAlloc - m0.TotalAlloc
	}
	small, large := allocFor(1<<20), allocFor(64<<20)
	t.Logf("allocated %d bytes forwarding 1 MiB, %d bytes forwarding 64 MiB", small, large)
	if large > 1<<20 {
		t.Errorf("forwarding 64 MiB allocated %d bytes; it must stream", large)
	}
}
