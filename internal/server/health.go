package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/nekro-go/nekro/internal/files"
)

// Health check bounds: a database that takes longer than dbProbeTimeout
// to answer a trivial query is reported unavailable; the sandbox backend
// is checked (which starts a sandbox) at most every sandboxProbeEvery,
// and probes in between get the last result.
const (
	dbProbeTimeout      = 2 * time.Second
	sandboxProbeTimeout = 10 * time.Second
	sandboxProbeEvery   = 10 * time.Second
)

// sandboxProbe caches the sandbox backend's check.
type sandboxProbe struct {
	mu   sync.Mutex
	at   time.Time
	err  error
	done bool
}

// healthz answers GET /healthz, without a token: 200 {"status":"ok"}
// when the database answers, the data directory can be written and has
// room, and sandboxes can start, else 503
// {"status":"unavailable","reason":...} naming what is wrong. The
// reason never carries the data directory's paths (anyone may ask).
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	checks := map[string]string{"database": "ok", "storage": "ok", "sandbox": "ok"}
	var reasons []error
	if err := s.checkDatabase(r.Context()); err != nil {
		checks["database"] = err.Error()
		reasons = append(reasons, fmt.Errorf("database: %w", err))
	}
	if err := s.checkStorage(); err != nil {
		checks["storage"] = err.Error()
		reasons = append(reasons, fmt.Errorf("storage: %w", err))
	}
	if err := s.checkSandbox(r.Context()); err != nil {
		checks["sandbox"] = err.Error()
		reasons = append(reasons, fmt.Errorf("sandbox: %w", err))
	}
	if len(reasons) > 0 {
		s.log.Warn("health check failed", "reason", errors.Join(reasons...))
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable",
			"reason": errors.Join(reasons...).Error(), "checks": checks})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "checks": checks})
}

// checkDatabase runs a trivial query with a short deadline. An embedded
// database whose file was deleted under the running server still answers
// from the open file, but everything written from then on is lost at
// exit: that is reported too.
func (s *Server) checkDatabase(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, dbProbeTimeout)
	defer cancel()
	if d := s.parts.DB.SQLite; d != nil {
		if _, err := os.Stat(d.Path); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return errors.New("the SQLite database file is gone (deleted while nekro runs: what it writes now is lost at exit; restore it and restart)")
			}
			return errors.New("the SQLite database file cannot be reached: " + errors.Unwrap(err).Error())
		}
	}
	if err := s.users.Ping(ctx); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("no answer within %s", dbProbeTimeout)
		}
		return errors.New("a trivial query failed (see the server's log)")
	}
	return nil
}

// checkSandbox reports the backend's check (runtime.Runner().Check),
// made at most every sandboxProbeEvery.
func (s *Server) checkSandbox(ctx context.Context) error {
	p := &s.sandboxProbe
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done && time.Since(p.at) < sandboxProbeEvery {
		return p.err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sandboxProbeTimeout)
	defer cancel()
	p.err = s.rt.Runner().Check(ctx)
	if p.err != nil {
		s.log.Warn("sandbox check failed", "err", p.err)
		p.err = errors.New("the sandbox backend cannot start a sandbox (see the server's log, or run `nekro doctor`)")
	}
	p.at, p.done = time.Now(), true
	return p.err
}

// checkStorage reports a data directory that is full (under
// files.MinFreeBytes or no free inode left), mounted read-only, or where
// a small file cannot be written and removed. The answer names the
// problem, never the directory, whose path goes to the log.
func (s *Server) checkStorage() error {
	root := s.rt.Layout().Root
	if err := files.CheckSpace(root); err != nil {
		if !errors.Is(err, files.ErrNoSpace) {
			s.log.Warn("health check: statfs of the data directory", "dir", root, "err", err)
			return errors.New("the data directory cannot be examined (see the server's log)")
		}
		return err
	}
	f, err := os.CreateTemp(root, ".healthz-*")
	if err == nil {
		_, err = f.Write([]byte("ok\n"))
		f.Close()
		os.Remove(f.Name())
	}
	if err != nil {
		s.log.Warn("health check: a file cannot be written in the data directory", "dir", root, "err", errors.Unwrap(err))
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("a file cannot be written in the data directory: %v", err)
	}
	return nil
}
