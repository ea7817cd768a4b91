package files

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/nekro-go/nekro/internal/keys"
)

// SaveUpload writes r as file name in chatKey's uploads directory, seen by
// the chat's runs as /app/uploads/<name>, and returns that sandbox path.
// The name is sanitized (see SanitizeFileName); the file, mode 0644, appears
// complete or not at all and replaces an earlier upload of the same name.
func SaveUpload(ctx context.Context, l Layout, chatKey, name string, r io.Reader) (string, error) {
	if err := keys.Scope("chat", chatKey); err != nil {
		return "", fmt.Errorf("upload: %w", err)
	}
	n, err := SanitizeFileName(name)
	if err != nil {
		return "", fmt.Errorf("upload: %w", err)
	}
	dir, err := l.EnsureUploadsDir(chatKey)
	if err != nil {
		return "", fmt.Errorf("upload: %w", errOnly(err))
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", fmt.Errorf("upload: %w", errOnly(err))
	}
	defer root.Close()
	// The directory is the chat's (its sandbox uid's, mode 0700); the file
	// is readable so that the sandbox, running as that uid, can read it
	// whoever wrote it.
	_, err = writeAtomic(root, owner{}, func(w *os.File) (int64, error) {
		if err := w.Chmod(0o644); err != nil {
			return 0, err
		}
		if f, ok := r.(*os.File); ok {
			return io.Copy(w, f) // copy_file_range: no pass through user space
		}
		return io.Copy(w, readerCtx{ctx: ctx, r: r})
	}, func() (string, error) { return n, nil })
	if err != nil {
		return "", fmt.Errorf("upload %s: %w", n, err)
	}
	return SandboxPath(Uploads, n), nil
}

// ImportUpload copies the host file at srcPath into chatKey's uploads
// directory under its base name and returns its sandbox path,
// "/app/uploads/<name>". It is what `nekro exec --upload FILE` does.
func ImportUpload(ctx context.Context, l Layout, chatKey, srcPath string) (string, error) {
	f, err := os.Open(srcPath)
	if err != nil {
		return "", fmt.Errorf("upload: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("upload: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("upload %s: not a regular file", srcPath)
	}
	return SaveUpload(ctx, l, chatKey, filepath.Base(srcPath), f)
}
