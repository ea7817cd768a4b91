package files

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nekro-go/nekro/plugin"
)

// Sandbox paths, as the AI's code sees them.
const (
	SandboxApp     = "/app"         // the sandbox's working directory
	SandboxUploads = "/app/uploads" // the chat's uploads, read-only
	SandboxShared  = "/app/shared"  // the sandbox's files, writable
)

// Limits on paths, matching Linux's NAME_MAX and PATH_MAX.
const (
	MaxNameLen = 255
	MaxPathLen = 4096
)

// Area is one of the two host directories a sandbox path can reach.
type Area int

const (
	// Uploads is the chat's uploads directory, /app/uploads.
	Uploads Area = iota + 1
	// Shared is the sandbox's shared directory, /app/shared.
	Shared
)

// String returns the area's sandbox prefix.
func (a Area) String() string {
	switch a {
	case Uploads:
		return SandboxUploads
	case Shared:
		return SandboxShared
	}
	return fmt.Sprintf("Area(%d)", int(a))
}

// allowed is the hint every refusal of a sandbox path ends with.
const allowed = "use a path under /app/shared/ or /app/uploads/ (or shared/... and uploads/... relative to /app)"

// ParseSandboxPath is the one rule from sandbox to host: it splits a path the
// AI's code gave into its area and a relative path that is local (no "..",
// not absolute, not empty; "." means the area's directory itself).
//
// A relative path is taken against /app. Repeated separators and "."
// components are dropped. Refused, with an error wrapping
// plugin.ErrPathRefused: an empty path, NUL or invalid UTF-8, any ".."
// component (even one that would stay inside), a component over 255 bytes,
// a path over 4096 bytes, and anything not under /app/shared or
// /app/uploads. Percent signs and backslashes are ordinary characters: they
// are never decoded, so they cannot smuggle separators.
func ParseSandboxPath(p string) (Area, string, error) {
	switch {
	case p == "":
		return 0, "", refuse("empty path: %s", allowed)
	case strings.IndexByte(p, 0) >= 0:
		return 0, "", refuse("path %.80q contains a NUL byte", p)
	case !utf8.ValidString(p):
		return 0, "", refuse("path %.80q is not valid UTF-8", p)
	case len(p) > MaxPathLen:
		return 0, "", refuse("path is %d bytes, over the limit of %d", len(p), MaxPathLen)
	}
	for c := range strings.SplitSeq(p, "/") {
		if c == ".." {
			return 0, "", refuse("path %.80q contains \"..\"; %s", p, allowed)
		}
		if len(c) > MaxNameLen {
			return 0, "", refuse("path %.80q has a name of %d bytes, over the limit of %d", p, len(c), MaxNameLen)
		}
	}
	abs := p
	if !strings.HasPrefix(abs, "/") {
		abs = SandboxApp + "/" + abs
	}
	abs = path.Clean(abs) // no ".." left, so Clean only drops "." and "//"
	for _, a := range []Area{Shared, Uploads} {
		prefix := a.String()
		if abs == prefix {
			return a, ".", nil
		}
		if rest, ok := strings.CutPrefix(abs, prefix+"/"); ok {
			return a, rest, nil
		}
	}
	return 0, "", refuse("path %.80q is outside the sandbox's files; %s", p, allowed)
}

// SandboxPath is the one rule from host to sandbox: the sandbox path of rel
// (a local, slash-separated path) in area.
func SandboxPath(a Area, rel string) string {
	if rel == "." || rel == "" {
		return a.String()
	}
	return a.String() + "/" + filepath.ToSlash(rel)
}

// SanitizeFileName turns a name chosen by a user, a plugin or the AI into
// one safe directory entry: "/", "\", NUL and other control characters
// (C0, DEL, C1, U+2028, U+2029) become "_"; invisible format characters
// (Unicode category Cf: the bidi controls U+202A-U+202E, U+2066-U+2069,
// U+200E, U+200F, U+061C, zero-width spaces and joiners, U+FEFF, ...) are
// dropped, so "\u202egnp.exe" cannot show as "exe.png"; a name over 255
// bytes is shortened, keeping its extension when it can; an empty name
// (also one of format characters only), "." and ".." are refused.
func SanitizeFileName(name string) (string, error) {
	var b strings.Builder
	for _, r := range name {
		switch {
		case unicode.Is(unicode.Cf, r):
			// dropped: invisible, and bidi controls reorder what is shown
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029' ||
			r == '/' || r == '\\' || r == utf8.RuneError:
			b.WriteByte('_')
		default:
			b.WriteRune(r)
		}
	}
	s := b.String()
	switch s {
	case "":
		return "", refuse("empty file name")
	case ".", "..":
		return "", refuse("file name %q is not allowed", s)
	}
	if len(s) > MaxNameLen {
		ext := path.Ext(s)
		if len(ext) > 16 {
			ext = ""
		}
		s = truncateUTF8(s[:len(s)-len(ext)], MaxNameLen-len(ext)) + ext
	}
	return s, nil
}

// truncateUTF8 cuts s to at most n bytes without splitting a rune.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %s", plugin.ErrPathRefused, fmt.Sprintf(format, args...))
}
