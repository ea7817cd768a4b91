// Package server is `nekro serve`: the runtime, the chat service and the
// agent behind an HTTP API with bearer-token authentication.
//
// Start opens everything from Options and listens; Shutdown stops it
// gracefully. Tests start a real server with Start and speak HTTP to it.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/nekro-go/nekro/internal/agent"
	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/users"
)

// Defaults of Options.
const (
	DefaultListen          = "127.0.0.1:8021"
	DefaultShutdownTimeout = 30 * time.Second
	// EnvAPIToken sets the API token instead of the generated one.
	EnvAPIToken = "NEKRO_API_TOKEN"
)

// Options configure a server. The zero value (plus App.DataDir) is a
// working setup: SQLite in the data directory (App.DatabaseURL chooses
// another database for the KV store and the chats alike), bubblewrap
// sandboxes, a generated token, and no model until App.LLM names one.
type Options struct {
	Listen string // default 127.0.0.1:8021
	// App is what the server serves: data directory, database, sandboxes,
	// plugins, model. Start assembles it with app.Open.
	App app.Config
	// Token is the API token; empty means the one stored in the data
	// directory, generated (and written to TokenOut) on first start.
	Token    string
	TokenOut io.Writer
	// ShutdownTimeout is how long Shutdown lets turns and requests finish
	// when its context has no deadline.
	ShutdownTimeout time.Duration
	// UploadMaxFile and UploadMaxMessage bound the files a user sends
	// with a message (multipart POST .../messages): one file, and all of
	// one message's together. 0 means DefaultUploadMaxFile and
	// DefaultUploadMaxMessage.
	UploadMaxFile, UploadMaxMessage int64
	Log                             *slog.Logger
}

// Server is a running nekro server.
type Server struct {
	// Addr is the address it listens on (useful with port 0).
	Addr string
	// Token is the bearer token every API call needs.
	Token string
	// Model is the configured model's name, "" when none.
	Model string

	opts   Options
	log    *slog.Logger
	app    *app.App
	rt     *runtime.Runtime
	chats  *chat.Service
	agent  *agent.Agent
	users  *users.Store
	http   *http.Server
	ln     net.Listener
	served chan error

	streamsDone chan struct{} // closed at shutdown: ends event streams
	closeOnce   sync.Once

	sandboxProbe sandboxProbe // GET /healthz's sandbox check, cached
}

// Start opens the database, the runtime and the agent, and starts
// listening. The caller must call Shutdown.
func Start(ctx context.Context, opts Options) (_ *Server, err error) {
	if opts.Listen == "" {
		opts.Listen = DefaultListen
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.App.Log == nil {
		opts.App.Log = opts.Log
	}
	s := &Server{opts: opts, log: opts.Log, streamsDone: make(chan struct{}), served: make(chan error, 1)}
	var cleanups []func()
	defer func() {
		if err != nil {
			for i := len(cleanups) - 1; i >= 0; i-- {
				cleanups[i]()
			}
		}
	}()

	// A busy address fails first, before anything is opened or generated.
	s.ln, err = net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s.Addr = s.ln.Addr().String()
	cleanups = append(cleanups, func() { s.ln.Close() })

	a, err := app.Open(ctx, opts.App)
	if err != nil {
		return nil, err
	}
	cleanups = append(cleanups, func() { a.Close(context.WithoutCancel(ctx)) })
	s.app, s.rt, s.chats, s.agent, s.Model = a, a.Runtime, a.Chats, a.Agent, a.Model
	s.users = a.Users
	if err := s.rt.Runner().Check(ctx); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}

	s.Token = opts.Token
	if s.Token == "" {
		s.Token, err = loadOrCreateToken(s.rt.Layout().Root, opts.TokenOut)
		if err != nil {
			return nil, err
		}
	}

	s.http = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(opts.Log.Handler(), slog.LevelWarn),
	}
	s.http.RegisterOnShutdown(func() { s.closeStreams() })
	if err := s.agent.Resume(ctx); err != nil {
		return nil, err
	}
	go func() { s.served <- s.http.Serve(s.ln) }()
	return s, nil
}

func (s *Server) closeStreams() { s.closeOnce.Do(func() { close(s.streamsDone) }) }

// Shutdown stops the server gracefully: it stops accepting connections,
// lets requests and turns in progress finish until ctx ends (or
// ShutdownTimeout passes, when ctx has no deadline), then stops the runs
// still going (they end as MANUAL), runs the plugins' cleanup hooks and
// closes the database.
func (s *Server) Shutdown(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opts.ShutdownTimeout)
		defer cancel()
	}
	var errs []error
	s.closeStreams()
	if err := s.http.Shutdown(ctx); err != nil {
		s.http.Close()
		errs = append(errs, fmt.Errorf("http: %w", err))
	}
	// The agent lets turns finish until ctx ends; then the runtime stops
	// what still runs, and the database closes last.
	if err := s.app.Close(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := <-s.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
