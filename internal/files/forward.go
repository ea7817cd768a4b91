package files

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/nekro-go/nekro/plugin"
)

// partialPrefix starts the name of a file being written; it is renamed to
// its real name only once complete.
const partialPrefix = ".nekro-partial-"

// MixedForwardFile puts src into /app/shared and returns its sandbox path.
// See plugin.FS for the sources it takes.
func (f *FS) MixedForwardFile(ctx context.Context, src any, fileName string) (string, error) {
	name := ""
	if fileName != "" {
		n, err := SanitizeFileName(fileName)
		if err != nil {
			return "", fmt.Errorf("forward: %w", err)
		}
		name = n
	}
	switch s := src.(type) {
	case string:
		switch {
		case plugin.IsURL(s):
			return f.forwardURL(ctx, s, name)
		case strings.HasPrefix(s, "data:"):
			return f.forwardDataURI(ctx, s, name)
		case s == "":
			return "", errors.New("forward: empty source")
		default:
			return f.forwardHostPath(ctx, s, name)
		}
	case []byte:
		return f.writeShared(ctx, name, bytes.NewReader(s))
	case *os.File:
		if s == nil {
			return "", errors.New("forward: nil file")
		}
		if name == "" {
			n, err := SanitizeFileName(filepath.Base(s.Name()))
			if err != nil {
				return "", fmt.Errorf("forward: %w", err)
			}
			name = n
		}
		return f.writeShared(ctx, name, s)
	case io.Reader:
		if s == nil {
			return "", errors.New("forward: nil reader")
		}
		return f.writeShared(ctx, name, s)
	case nil:
		return "", errors.New("forward: nil source")
	}
	return "", fmt.Errorf("forward: unsupported source type %T (want a URL, data: URI, host path, []byte or io.Reader)", src)
}

// forwardHostPath forwards a host file: without a copy when it is already
// in the run's shared or uploads directory, copied when it is in the
// calling plugin's data directory, refused anywhere else.
func (f *FS) forwardHostPath(ctx context.Context, hostPath, name string) (string, error) {
	if !filepath.IsAbs(hostPath) {
		return "", fmt.Errorf("forward: %w: host path %q is not absolute", plugin.ErrPathRefused, filepath.Base(hostPath))
	}
	if _, _, ok := f.areaOf(hostPath); ok {
		return f.ForwardFile(hostPath)
	}
	if f.pluginKey != "" {
		dir := f.layout.PluginDir(f.pluginKey)
		rel, err := filepath.Rel(dir, filepath.Clean(hostPath))
		if err == nil && filepath.IsLocal(rel) {
			r, err := os.OpenRoot(dir)
			if err != nil {
				return "", fmt.Errorf("forward: plugin data dir: %w", errOnly(err))
			}
			defer r.Close()
			src, err := openNoBlock(r, rel, os.O_RDONLY, 0)
			if err != nil {
				if escapes(r, rel) {
					return "", fmt.Errorf("forward %s: %w: a symlink leads out of the plugin's data directory", rel, plugin.ErrPathRefused)
				}
				return "", fmt.Errorf("forward %s: %w", rel, errOnly(err))
			}
			defer src.Close()
			if fi, err := src.Stat(); err == nil && !fi.Mode().IsRegular() {
				return "", fmt.Errorf("forward %s: not a regular file", rel)
			}
			if name == "" {
				if name, err = SanitizeFileName(filepath.Base(rel)); err != nil {
					return "", fmt.Errorf("forward: %w", err)
				}
			}
			return f.writeShared(ctx, name, src)
		}
	}
	return "", fmt.Errorf("forward: %w: host file %q is outside this run's shared and uploads directories and the plugin's data directory; open it yourself and pass the *os.File",
		plugin.ErrPathRefused, filepath.Base(hostPath))
}

// forwardURL downloads rawURL into /app/shared.
func (f *FS) forwardURL(ctx context.Context, rawURL, name string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("forward: bad URL: %w", err)
	}
	if name == "" {
		if base := path.Base(u.Path); base != "/" && base != "." && base != "" {
			if n, err := SanitizeFileName(base); err == nil {
				name = n
			}
		}
	}
	var contentType string
	fill := func(w io.Writer) (int64, error) {
		n, ct, err := f.dl.fetch(ctx, rawURL, w)
		contentType = ct
		return n, err
	}
	return f.writeSharedFunc(ctx, name, func(h []byte) string {
		return "download-" + hex.EncodeToString(sha256sum([]byte(rawURL))[:8]) + extFor(contentType, h)
	}, fill)
}

// forwardDataURI decodes a data: URI into /app/shared.
func (f *FS) forwardDataURI(ctx context.Context, uri, name string) (string, error) {
	mediaType, payload, isB64, err := parseDataURI(uri)
	if err != nil {
		return "", fmt.Errorf("forward: %w", err)
	}
	max := f.opts.MaxDownloadBytes
	var r io.Reader
	if isB64 {
		if int64(base64.StdEncoding.DecodedLen(len(payload))) > max+3 {
			return "", fmt.Errorf("forward: data: URI is over the %d-byte limit", max)
		}
		r = base64.NewDecoder(base64.StdEncoding, strings.NewReader(payload))
	} else {
		dec, err := url.PathUnescape(payload)
		if err != nil {
			return "", fmt.Errorf("forward: data: URI: %w", err)
		}
		r = strings.NewReader(dec)
	}
	fill := func(w io.Writer) (int64, error) {
		n, err := io.Copy(w, io.LimitReader(r, max+1))
		if err != nil {
			return n, fmt.Errorf("data: URI: %w", err)
		}
		if n > max {
			return n, fmt.Errorf("data: URI is over the %d-byte limit", max)
		}
		return n, nil
	}
	sum := sha256sum([]byte(payload))
	return f.writeSharedFunc(ctx, name, func(h []byte) string {
		return hex.EncodeToString(sum[:8]) + extFor(mediaType, h)
	}, fill)
}

// parseDataURI splits "data:[<media type>][;base64],<data>".
func parseDataURI(uri string) (mediaType, payload string, isB64 bool, err error) {
	head, payload, ok := strings.Cut(strings.TrimPrefix(uri, "data:"), ",")
	if !ok {
		return "", "", false, errors.New("data: URI has no comma")
	}
	if h, found := strings.CutSuffix(head, ";base64"); found {
		head, isB64 = h, true
	}
	mediaType = head
	if mt, _, err := mime.ParseMediaType(head); err == nil {
		mediaType = mt
	}
	return mediaType, payload, isB64, nil
}

// writeShared streams r into /app/shared as name; an empty name becomes a
// hash of the content plus a sniffed extension.
func (f *FS) writeShared(ctx context.Context, name string, r io.Reader) (string, error) {
	var h hash.Hash
	src := r
	if name == "" {
		h = sha256.New()
		src = io.TeeReader(r, h)
	}
	if _, isFile := r.(*os.File); !isFile || h != nil {
		src = readerCtx{ctx: ctx, r: src}
	}
	fill := func(w io.Writer) (int64, error) { return io.Copy(w, src) }
	return f.writeSharedFunc(ctx, name, func(head []byte) string {
		return hex.EncodeToString(h.Sum(nil)[:8]) + extFor("", head)
	}, fill)
}

// writeSharedFunc writes a file into /app/shared atomically: fill writes a
// hidden partial file, which is renamed to name (or to nameFor of the
// first bytes, when name is empty) only when fill succeeds, and removed
// otherwise.
func (f *FS) writeSharedFunc(ctx context.Context, name string, nameFor func(head []byte) string, fill func(io.Writer) (int64, error)) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("forward: %w", err)
	}
	r, err := f.root(Shared, true)
	if err != nil {
		return "", fmt.Errorf("forward: %w", err)
	}
	defer r.Close()
	var head *headWriter
	if name == "" {
		head = &headWriter{}
	}
	final, err := writeAtomic(r, ownerOf(r, Shared), func(w *os.File) (int64, error) {
		var dst io.Writer = w
		if head != nil {
			dst = io.MultiWriter(w, head)
		}
		return fill(dst)
	}, func() (string, error) {
		if name != "" {
			return name, nil
		}
		return SanitizeFileName(nameFor(head.b))
	})
	if err != nil {
		return "", fmt.Errorf("forward: %w", err)
	}
	return SandboxPath(Shared, final), nil
}

// writeAtomic creates a partial file beneath r, lets fill write it, and
// renames it to the name returned by nameFn. On any failure the partial
// file is removed, so no half-written file is ever visible under a real
// name. An entry already at the final name (even a symlink) is replaced,
// never followed.
func writeAtomic(r *os.Root, own owner, fill func(*os.File) (int64, error), nameFn func() (string, error)) (string, error) {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	tmp := partialPrefix + hex.EncodeToString(rnd[:])
	w, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", errOnly(err)
	}
	fail := func(err error) (string, error) {
		w.Close()
		r.Remove(tmp)
		return "", err
	}
	if _, err := fill(w); err != nil {
		return fail(err)
	}
	if err := own.chown(w); err != nil {
		return fail(err)
	}
	if err := w.Close(); err != nil {
		r.Remove(tmp)
		return "", errOnly(err)
	}
	name, err := nameFn()
	if err != nil {
		r.Remove(tmp)
		return "", err
	}
	if err := r.Rename(tmp, name); err != nil {
		r.Remove(tmp)
		return "", fmt.Errorf("%s: %w", name, errOnly(err))
	}
	return name, nil
}

// headWriter keeps the first 512 bytes written, for content sniffing.
type headWriter struct{ b []byte }

func (h *headWriter) Write(p []byte) (int, error) {
	if room := 512 - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func sha256sum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

// commonExt are the extensions used for common media types, where
// mime.ExtensionsByType would offer several.
var commonExt = map[string]string{
	"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp",
	"image/svg+xml": ".svg", "image/bmp": ".bmp", "text/plain": ".txt", "text/html": ".html",
	"text/csv": ".csv", "text/markdown": ".md", "application/json": ".json",
	"application/pdf": ".pdf", "application/zip": ".zip", "audio/mpeg": ".mp3",
	"audio/wav": ".wav", "video/mp4": ".mp4",
}

// extFor picks a file extension for a media type, sniffing head when the
// type is unknown. It returns "" for opaque binary data.
func extFor(mediaType string, head []byte) string {
	mt, _, err := mime.ParseMediaType(mediaType)
	if err != nil || mt == "" || mt == "application/octet-stream" {
		if len(head) == 0 {
			return ""
		}
		mt, _, _ = mime.ParseMediaType(http.DetectContentType(head))
	}
	if e, ok := commonExt[mt]; ok {
		return e
	}
	if exts, err := mime.ExtensionsByType(mt); err == nil && len(exts) > 0 {
		return exts[0]
	}
	return ""
}
