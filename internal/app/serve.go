package app

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/nekro-go/nekro/internal/server"
)

// Served is a running `nekro serve`: the assembled App and the HTTP
// server in front of it.
type Served struct {
	*server.Server
	App *App
}

// Serve is `nekro serve`: it listens on opts.Listen (a busy address fails
// first, before anything is opened or generated), assembles nekro from
// cfg (Open), checks that the sandbox backend can start sandboxes, makes
// the server of the parts, resumes the turns an earlier process left and
// starts answering. The caller must call Shutdown.
func Serve(ctx context.Context, cfg Config, opts server.Options) (_ *Served, err error) {
	opts = opts.WithDefaults()
	if cfg.Log == nil {
		cfg.Log = opts.Log
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	defer func() {
		if err != nil {
			ln.Close()
		}
	}()
	cfg.watchPlugins = true
	a, err := Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			a.Close(context.WithoutCancel(ctx))
		}
	}()
	if err := a.Runtime.Runner().Check(ctx); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	srv, err := server.New(server.Parts{
		Runtime: a.Runtime, Host: a.Host, Chats: a.Chats, Agent: a.Agent, Users: a.Users, Store: a.Store,
		Deliveries: a.Deliveries, Metrics: a.Metrics, Adapters: a.Adapters, DB: a.DB,
		Files: cfg.Runtime.Files, CallTimeout: cfg.Runtime.CallTimeout, Model: a.Model,
		Models: a.Models, Presets: a.Presets, Knowledge: a.Knowledge,
		Memories: a.Memories, MemoryEnabled: a.Memory.Enabled(),
		FailedPlugins: func() map[string]error {
			if a.Python == nil {
				return nil
			}
			return a.Python.Failures() // current: the watcher loads and unloads plugins while serving
		},
	}, opts)
	if err != nil {
		return nil, err
	}
	if err := a.Agent.Resume(ctx); err != nil {
		return nil, err
	}
	srv.Serve(ln)
	return &Served{Server: srv, App: a}, nil
}

// Shutdown stops the server (streams, connections, requests in progress),
// then the App: the agent lets turns finish until ctx ends (or the
// server's ShutdownTimeout passes, when ctx has no deadline), the runs
// still going are stopped (they end as MANUAL), the plugins' cleanup
// hooks run and the database closes.
func (s *Served) Shutdown(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.ShutdownTimeout())
		defer cancel()
	}
	return errors.Join(s.Server.Shutdown(ctx), s.App.Close(ctx))
}
