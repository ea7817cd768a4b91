// Package server is nekro's HTTP face: the API with bearer-token
// authentication, the web UI, webhooks, plugins' routes, MCP and the chat
// platforms' endpoints, in front of the parts internal/app assembles.
//
// New is given the Parts it serves (it opens nothing itself), Serve
// starts it on a listener and Shutdown stops it gracefully. `nekro serve`
// is app.Serve, which builds the parts, then the server; tests start it
// the same way and speak HTTP to it.
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

	"github.com/nekro-go/nekro/internal/adapterhost"
	"github.com/nekro-go/nekro/internal/agent"
	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/deliveries"
	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/host"
	"github.com/nekro-go/nekro/internal/knowledge"
	"github.com/nekro-go/nekro/internal/kv"
	"github.com/nekro-go/nekro/internal/memory"
	"github.com/nekro-go/nekro/internal/metrics"
	"github.com/nekro-go/nekro/internal/models"
	"github.com/nekro-go/nekro/internal/presets"
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

// Options configure a server: how it listens and answers. What it serves
// comes as Parts, assembled by internal/app (app.Serve).
type Options struct {
	Listen string // default 127.0.0.1:8021
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
	// Build is the binary's version, shown to the operator by
	// GET /api/status and the web UI.
	Build Build
}

// Build is what `nekro version` says of the binary.
type Build struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`     // "" when the build recorded none; "-dirty" when the checkout had changes
	BuildDate string `json:"build_date"` // "" when the build recorded none
	Go        string `json:"go"`         // the Go version and platform
}

// WithDefaults fills the zero fields of o.
func (o Options) WithDefaults() Options {
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return o
}

// Parts are what a server serves, every one opened by its owner
// (internal/app) and closed by it after the server's Shutdown. Adapters
// may be nil (no chat platform).
type Parts struct {
	Runtime     *runtime.Runtime // the sandboxes: the data directory, the backend's health
	Host        *host.Host       // the plugins: lists, settings, enable/disable, tasks, MCP
	Chats       *chat.Service
	Agent       *agent.Agent
	Users       *users.Store
	Store       *kv.Store         // the plugins' KV store, for MCP calls
	Deliveries  *deliveries.Store // webhook deliveries already handled
	Metrics     *metrics.Metrics  // GET /metrics
	Adapters    *adapterhost.Set  // chat platforms' routes and status
	DB          db.Handle         // the database, for /healthz
	Files       files.Options     // downloads and forwards of MCP calls, as the runtime's
	CallTimeout time.Duration     // a plugin method's deadline in MCP calls, as the runtime's
	// Model is the configured model's name, "" when none.
	Model string
	// Models are the operator's model groups (/api/models); nil: none.
	Models *models.Store
	// Presets are the personas and the chats' choices (/api/presets);
	// nil: none.
	Presets *presets.Store
	// Knowledge is the knowledge base (/api/knowledge); nil: none.
	Knowledge *knowledge.Store
	// Memories are the chats' long-term memories
	// (/api/chats/{chat}/memories); nil: none. MemoryEnabled says whether
	// they are learned and recalled now.
	Memories      *memory.Store
	MemoryEnabled bool
	// FailedPlugins returns the Python plugins that did not load, by
	// path, with why (a *pyplugin.LoadError when their import raised);
	// nil when none.
	FailedPlugins func() map[string]error
}

// Server is nekro's HTTP API, web UI, webhooks, plugin routes, MCP and
// chat platforms' endpoints.
type Server struct {
	// Addr is the address it listens on (useful with port 0), once Serve
	// was called.
	Addr string
	// Token is the bearer token every API call needs.
	Token string
	// Model is the configured model's name, "" when none.
	Model string

	opts   Options
	parts  Parts
	log    *slog.Logger
	rt     *runtime.Runtime
	host   *host.Host
	chats  *chat.Service
	agent  *agent.Agent
	users  *users.Store
	http   *http.Server
	served chan error

	streamsDone chan struct{} // closed at shutdown: ends event streams
	closeOnce   sync.Once

	sandboxProbe sandboxProbe // GET /healthz's sandbox check, cached
}

// New makes the server of parts; Serve starts it. The API token is
// opts.Token, or the data directory's (generated on first start).
func New(parts Parts, opts Options) (*Server, error) {
	opts = opts.WithDefaults()
	s := &Server{opts: opts, parts: parts, log: opts.Log, streamsDone: make(chan struct{}), served: make(chan error, 1),
		rt: parts.Runtime, host: parts.Host, chats: parts.Chats, agent: parts.Agent, users: parts.Users, Model: parts.Model}
	s.Token = opts.Token
	if s.Token == "" {
		var err error
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
	return s, nil
}

// ShutdownTimeout is how long Shutdown waits when its context has no
// deadline.
func (s *Server) ShutdownTimeout() time.Duration { return s.opts.ShutdownTimeout }

// Serve answers on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) {
	s.Addr = ln.Addr().String()
	go func() { s.served <- s.http.Serve(ln) }()
}

func (s *Server) closeStreams() { s.closeOnce.Do(func() { close(s.streamsDone) }) }

// Shutdown stops the server gracefully: it ends the event streams, stops
// accepting connections and lets requests in progress finish until ctx
// ends (or ShutdownTimeout passes, when ctx has no deadline). The parts
// it served are closed by their owner afterwards (app.Served.Shutdown).
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
	if s.Addr != "" {
		if err := <-s.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
