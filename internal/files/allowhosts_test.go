package files_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/files"
)

// A chat platform's own file server on a loopback address is reachable
// when its host:port is allowed, and only that one: another port of the
// same address, and a redirect from the allowed server to a private one,
// stay refused.
func TestDownloaderAllowHosts(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("secret")) }))
	defer other.Close()
	platform := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/jump" {
			http.Redirect(w, r, other.URL, http.StatusFound)
			return
		}
		w.Write([]byte("image bytes"))
	}))
	defer platform.Close()
	host := strings.TrimPrefix(platform.URL, "http://")

	var buf bytes.Buffer
	if _, _, err := files.NewDownloader(files.Options{}).Fetch(context.Background(), platform.URL+"/a.png", &buf); !errors.Is(err, files.ErrPrivateAddress) {
		t.Fatalf("without an allowance: %v, want ErrPrivateAddress", err)
	}
	d := files.NewDownloader(files.Options{AllowHosts: []string{host}})
	if _, _, err := d.Fetch(context.Background(), platform.URL+"/a.png", &buf); err != nil || buf.String() != "image bytes" {
		t.Fatalf("allowed host: %q, %v", buf.String(), err)
	}
	if _, _, err := d.Fetch(context.Background(), other.URL, &buf); !errors.Is(err, files.ErrPrivateAddress) {
		t.Fatalf("another port: %v, want ErrPrivateAddress", err)
	}
	if _, _, err := d.Fetch(context.Background(), platform.URL+"/jump", &buf); !errors.Is(err, files.ErrPrivateAddress) {
		t.Fatalf("redirect to a private server: %v, want ErrPrivateAddress", err)
	}
}
