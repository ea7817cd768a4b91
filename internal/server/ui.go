package server

import (
	"embed"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"

	"github.com/nekro-go/nekro/internal/files"
)

// web is the browser UI: a static page that talks to the API with the
// token the user types in. It holds no data, so it is served without a
// token; everything it shows comes from authenticated API calls.
//
//go:embed web
var web embed.FS

// ui serves the page at / and its assets under /ui/.
func ui() http.Handler {
	assets, _ := fs.Sub(web, "web")
	static := http.StripPrefix("/ui/", http.FileServer(http.FS(assets)))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, assets, "index.html")
	})
	mux.Handle("GET /ui/", static)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path)
	})
	return securityHeaders(mux)
}

// securityHeaders keeps the page from loading anything but its own assets
// and from being framed.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' blob:; object-src 'none'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// upload serves one file of the chat's uploads (attachments, files the
// user sent), read through a root on the chat's uploads directory so no
// name can leave it.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	key, ok := chatKey(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	if clean, err := files.SanitizeFileName(name); err != nil || clean != name || path.Base(name) != name {
		writeError(w, http.StatusBadRequest, "%q is not a file name", name)
		return
	}
	// A file another replica stored is copied here first.
	if _, err := s.chats.SyncUploads(r.Context(), key); err != nil {
		s.writeFailure(w, http.StatusInternalServerError, err)
		return
	}
	// Ensure, not just the path: the directory may be a volume this
	// process has not mounted yet.
	if !s.rt.Layout().HasUploadsDir(key) {
		writeError(w, http.StatusNotFound, "chat %s has no uploads", key)
		return
	}
	dir, err := s.rt.Layout().EnsureUploadsDir(key)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "uploads of chat %s: %v", key, err)
		return
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		writeError(w, http.StatusNotFound, "chat %s has no uploads", key)
		return
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			writeError(w, http.StatusNotFound, "chat %s has no upload %q", key, name)
		} else {
			writeError(w, http.StatusForbidden, "upload %q cannot be read", name)
		}
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		writeError(w, http.StatusForbidden, "upload %q is not a regular file", name)
		return
	}
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	ctype := http.DetectContentType(head[:n])
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		writeError(w, http.StatusInternalServerError, "read upload: %v", err)
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// Only images display inline; anything else (HTML included) downloads.
	if !isImage(ctype) {
		w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	}
	w.Header().Set("Content-Security-Policy", "default-src 'none'; sandbox")
	http.ServeContent(w, r, "", st.ModTime(), f)
}

func isImage(ctype string) bool {
	switch ctype {
	case "image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp":
		return true
	}
	return false
}
