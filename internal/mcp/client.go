package mcp

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nekro-go/nekro/internal/host"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/plugin"
)

// Author is the author part of every MCP server's plugin key, mcp.NAME.
const Author = "mcp"

// Start and restart bounds of the servers' processes and connections.
const (
	// StartTimeout bounds starting a server and listing its tools.
	StartTimeout = 30 * time.Second
	minBackoff   = 100 * time.Millisecond
	maxBackoff   = 30 * time.Second
	// stableAfter is how long a server must have run for a crash to
	// restart it at once again (the backoff starts over).
	stableAfter = time.Minute
	// maxMethodName is the longest method name (the RPC server's limit).
	maxMethodName = 128
)

// Options say where the config file is and where the tools lists are
// kept.
type Options struct {
	// Config is the file of MCP servers (--mcp-config); empty: none.
	Config string
	// StateDir keeps each server's latest tools list, so a server is
	// started only when first called (usually data/mcp).
	StateDir string
	Log      *slog.Logger
}

// Set is the MCP servers of a config file as plugins.
type Set struct {
	// Plugins are mcp.NAME, one per server, sorted by key.
	Plugins []*plugin.Plugin
	// Failed says, per server name, why it is left out (its tools could
	// not be listed).
	Failed map[string]error
	conns  []*conn
}

// Load reads the config file and builds a plugin per server. A server is
// started only when one of its tools is first called, if its tools list
// is known from an earlier start (kept in StateDir, per server and
// config entry); otherwise it is started now, its tools listed, and kept
// running. A server that cannot be listed is left out (Failed) and the
// others load.
func Load(ctx context.Context, opts Options) (*Set, error) {
	set := &Set{Failed: map[string]error{}}
	if opts.Config == "" {
		return set, nil
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	specs, err := LoadConfig(opts.Config, opts.Log)
	if err != nil {
		return nil, err
	}
	if opts.StateDir != "" {
		if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
			return nil, fmt.Errorf("mcp state: %w", err)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, spec := range specs {
		c := newConn(spec, opts.StateDir, opts.Log.With("mcp_server", spec.Name))
		wg.Go(func() {
			p, err := c.load(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				c.stop()
				set.Failed[spec.Name] = err
				opts.Log.Error("MCP server left out: its tools could not be listed", "server", spec.Name, "err", err)
				return
			}
			set.Plugins = append(set.Plugins, p)
			set.conns = append(set.conns, c)
		})
	}
	wg.Wait()
	sort.Slice(set.Plugins, func(i, j int) bool { return set.Plugins[i].Key() < set.Plugins[j].Key() })
	return set, nil
}

// Attach lets the servers' tools lists change the host's plugins while
// it runs: when a server says its tools changed
// (notifications/tools/list_changed) or lists other tools after a
// restart, its plugin mcp.NAME is rebuilt from the new list and replaces
// the old one (host.ReplacePlugin): the next runs' stubs and prompts,
// the API's plugin lists and /mcp offer the new tools; a run in progress
// keeps its own. Plugins holds the plugins as loaded, not the
// replacements. A change seen before Attach is applied by it.
func (s *Set) Attach(h *host.Host) {
	keys := make([]string, len(s.Plugins))
	for i, p := range s.Plugins {
		keys[i] = p.Key()
	}
	h.Registry().Dynamic(keys...)
	for _, c := range s.conns {
		c.mu.Lock()
		c.replace = h.ReplacePlugin
		c.mu.Unlock()
		c.remount()
	}
}

// Close stops every server still running.
func (s *Set) Close() error {
	var wg sync.WaitGroup
	for _, c := range s.conns {
		wg.Go(c.stop)
	}
	wg.Wait()
	return nil
}

// conn is one configured server: its connection while it runs, started
// on demand and again after it ends, with backoff.
type conn struct {
	spec      ServerSpec
	stateFile string
	hash      string
	log       *slog.Logger
	client    *mcp.Client

	mu       sync.Mutex
	sess     *mcp.ClientSession
	pgid     int           // the stdio server's process group, 0 when none
	starting chan struct{} // closed when the start in progress ends
	failures int
	nextTry  time.Time
	started  time.Time
	closed   bool
	live     map[string]bool // tools the running server lists; nil until listed
	// replace puts a rebuilt plugin in the host (Set.Attach); nil
	// before.
	replace func(*plugin.Plugin) error

	// remountMu serialises relists and remounts; the fields below are
	// guarded by it.
	remountMu sync.Mutex
	latest    state  // the newest tools list seen
	builtFrom []byte // the tools list and version the mounted plugin was built from
}

func newConn(spec ServerSpec, stateDir string, log *slog.Logger) *conn {
	c := &conn{spec: spec, log: log}
	b, _ := json.Marshal(spec)
	sum := sha256.Sum256(b)
	c.hash = hex.EncodeToString(sum[:8])
	if stateDir != "" {
		c.stateFile = filepath.Join(stateDir, spec.Module+".tools.json")
	}
	c.client = mcp.NewClient(&mcp.Implementation{Name: "nekro", Version: "1"}, &mcp.ClientOptions{
		Logger: log,
		ToolListChangedHandler: func(ctx context.Context, req *mcp.ToolListChangedRequest) {
			go c.relist(req.Session)
		},
	})
	return c
}

// state is what is kept of a server between starts.
type state struct {
	Hash    string      `json:"config_hash"`
	Version string      `json:"server_version"`
	Tools   []*mcp.Tool `json:"tools"`
}

// load builds the server's plugin from its kept tools list, or from a
// fresh one.
func (c *conn) load(ctx context.Context) (*plugin.Plugin, error) {
	st, ok := c.readState()
	if !ok {
		sctx, cancel := context.WithTimeout(ctx, StartTimeout)
		defer cancel()
		sess, err := c.session(sctx)
		if err != nil {
			return nil, err
		}
		tools, err := listTools(sctx, sess)
		if err != nil {
			return nil, err
		}
		st = state{Hash: c.hash, Tools: tools}
		if r := sess.InitializeResult(); r != nil && r.ServerInfo != nil {
			st.Version = r.ServerInfo.Version
		}
		c.setLive(tools)
		c.writeState(st)
	}
	p, err := c.build(st)
	if err != nil {
		return nil, err
	}
	c.remountMu.Lock()
	c.latest, c.builtFrom = st, stateKey(st)
	c.remountMu.Unlock()
	return p, nil
}

// stateKey is what decides whether a plugin must be rebuilt: the tools
// and the server's version.
func stateKey(st state) []byte {
	b, _ := json.Marshal(struct {
		V string
		T []*mcp.Tool
	}{st.Version, st.Tools})
	return b
}

func (c *conn) readState() (state, bool) {
	var st state
	if c.stateFile == "" {
		return st, false
	}
	b, err := os.ReadFile(c.stateFile)
	if err != nil || json.Unmarshal(b, &st) != nil || st.Hash != c.hash {
		return state{}, false
	}
	return st, true
}

func (c *conn) writeState(st state) {
	if c.stateFile == "" {
		return
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return
	}
	tmp := c.stateFile + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err == nil {
		err = os.Rename(tmp, c.stateFile)
	}
}

// listTools lists every page of a server's tools.
func listTools(ctx context.Context, sess *mcp.ClientSession) ([]*mcp.Tool, error) {
	var out []*mcp.Tool
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		out = append(out, t)
	}
	return out, nil
}

// build makes the plugin mcp.<Module>: a TOOL method per tool, named
// <Module>_<tool> as a Python identifier (tools are taken in name order;
// a name already taken gets _2, _3, ...).
func (c *conn) build(st state) (*plugin.Plugin, error) {
	desc := fmt.Sprintf("MCP server %s (%s)", c.spec.Name, c.spec.Command)
	if c.spec.URL != "" {
		desc = fmt.Sprintf("MCP server %s at %s", c.spec.Name, c.spec.URL)
	}
	p := plugin.New(plugin.Meta{Name: c.spec.Name, ModuleName: c.spec.Module, Author: Author,
		Version: st.Version, Description: desc})
	tools := append([]*mcp.Tool(nil), st.Tools...)
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
	used := map[string]bool{}
	mounted := map[string]string{} // method -> tool
	for _, t := range tools {
		if t == nil || t.Name == "" {
			continue
		}
		name := pyIdent(c.spec.Module+"_"+t.Name, c.spec.Module)
		if len(name) > maxMethodName-8 {
			name = name[:maxMethodName-8]
		}
		name = uniqueIdent(name, used)
		params := paramsOfSchema(t.InputSchema)
		hostParams := make([]pluginhost.Param, len(params))
		for i, pa := range params {
			hostParams[i] = pa.Param
		}
		tool := t.Name
		err := pluginhost.MountRaw(p, plugin.Method{Type: plugin.Tool, Name: name, Description: oneLine(firstLine(t)),
			Doc: toolDoc(c.spec.Name, t), Timeout: c.spec.Timeout}, hostParams, "Any",
			func(ctx *plugin.Ctx, args map[string]json.RawMessage) (json.RawMessage, error) {
				out := map[string]any{}
				for _, pa := range params {
					v, ok := args[pa.Name]
					if !ok || (string(v) == "null" && !pa.Nullable) {
						continue // None for an optional parameter: left out
					}
					out[pa.Prop] = v
				}
				return c.call(ctx, tool, out)
			})
		if err != nil {
			c.log.Warn("MCP tool left out", "tool", t.Name, "err", err)
			continue
		}
		mounted[name] = t.Name
	}
	p.OnCollectMethods(func(*plugin.Ctx) []string {
		c.mu.Lock()
		defer c.mu.Unlock()
		var names []string
		for method, tool := range mounted {
			if c.live == nil || c.live[tool] {
				names = append(names, method)
			}
		}
		return names
	})
	p.OnCleanup(func(context.Context) error { c.stop(); return nil })
	return p, nil
}

func firstLine(t *mcp.Tool) string {
	s := strings.TrimSpace(t.Description)
	if t.Title != "" {
		s = t.Title
	}
	if s == "" {
		return "MCP tool " + t.Name
	}
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// toolDoc is the doc text the AI reads of a tool.
func toolDoc(server string, t *mcp.Tool) string {
	d := strings.TrimSpace(t.Description)
	if d == "" {
		d = "MCP tool " + t.Name + "."
	}
	return fmt.Sprintf("%s\n\n(Tool %q of MCP server %s.)\n\nReturns:\n    Any: the tool's structured result as a dict if it gives one, "+
		"else its text (str), else a list of its content items (dicts with type text, image or resource). "+
		"A tool error raises PluginError with its text.", d, t.Name, server)
}

// session returns the running server's session, starting it if needed:
// after a failure or an end, not before its backoff has passed.
func (c *conn) session(ctx context.Context) (*mcp.ClientSession, error) {
	for {
		c.mu.Lock()
		switch {
		case c.closed:
			c.mu.Unlock()
			return nil, fmt.Errorf("MCP server %s: nekro is shutting down", c.spec.Name)
		case c.sess != nil:
			s := c.sess
			c.mu.Unlock()
			return s, nil
		case c.starting != nil:
			ch := c.starting
			c.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("MCP server %s is starting: %w", c.spec.Name, ctx.Err())
			}
		}
		wait := time.Until(c.nextTry)
		if wait > 0 {
			c.mu.Unlock()
			t := time.NewTimer(wait)
			select {
			case <-t.C:
				continue
			case <-ctx.Done():
				t.Stop()
				return nil, fmt.Errorf("MCP server %s failed and is restarted after a backoff (%d failures in a row): %w", c.spec.Name, c.failures, ctx.Err())
			}
		}
		ch := make(chan struct{})
		c.starting = ch
		c.mu.Unlock()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StartTimeout)
		s, pgid, err := c.start(sctx)
		cancel()
		c.mu.Lock()
		c.starting = nil
		close(ch)
		if err != nil {
			c.failures++
			c.nextTry = time.Now().Add(backoff(c.failures))
			c.mu.Unlock()
			return nil, fmt.Errorf("MCP server %s: %w", c.spec.Name, err)
		}
		if c.closed {
			c.mu.Unlock()
			s.Close()
			killGroup(pgid)
			return nil, fmt.Errorf("MCP server %s: nekro is shutting down", c.spec.Name)
		}
		c.sess, c.pgid, c.started = s, pgid, time.Now()
		c.mu.Unlock()
		go c.watch(s, pgid)
		go c.relist(s)
		return s, nil
	}
}

func backoff(failures int) time.Duration {
	d := minBackoff
	for i := 1; i < failures && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// start connects to the server: a child process for a stdio server, in
// a process group of its own (so its children end with it), or HTTP.
func (c *conn) start(ctx context.Context) (*mcp.ClientSession, int, error) {
	var t mcp.Transport
	pgid := 0
	var cmd *exec.Cmd
	if c.spec.Command != "" {
		cmd = exec.Command(c.spec.Command, c.spec.Args...)
		cmd.Env = childEnv(c.spec.Env)
		cmd.Dir = c.spec.Cwd
		cmd.Stderr = logWriter{log: c.log}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		t = &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	} else {
		hc := &http.Client{Transport: headerTransport{headers: c.spec.Headers, next: http.DefaultTransport}}
		if c.spec.SSE {
			t = &mcp.SSEClientTransport{Endpoint: c.spec.URL, HTTPClient: hc}
		} else {
			t = &mcp.StreamableClientTransport{Endpoint: c.spec.URL, HTTPClient: hc}
		}
	}
	s, err := c.client.Connect(ctx, t, nil)
	if cmd != nil && cmd.Process != nil {
		pgid = cmd.Process.Pid
	}
	if err != nil {
		killGroup(pgid)
		return nil, 0, err
	}
	c.log.Info("MCP server started")
	return s, pgid, nil
}

// watch notices the session's end: a server that ended while nekro runs
// is started again at the next call, after a backoff that grows while it
// keeps failing soon after starting.
func (c *conn) watch(s *mcp.ClientSession, pgid int) {
	err := s.Wait()
	s.Close()
	killGroup(pgid)
	c.ended(s, err)
}

// ended forgets session s, which ended with err, if it is still the
// current one.
func (c *conn) ended(s *mcp.ClientSession, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != s {
		return
	}
	go s.Close()
	killGroup(c.pgid)
	c.sess, c.pgid = nil, 0
	if c.closed {
		return
	}
	if time.Since(c.started) > stableAfter {
		c.failures = 0
	}
	c.failures++
	c.nextTry = time.Now().Add(backoff(c.failures))
	c.log.Warn("MCP server ended: it is started again at the next call", "err", err, "backoff", backoff(c.failures))
}

// relist records the tools the running server lists (after each start,
// and when it says they changed): the methods of tools it no longer lists
// leave the next runs' stubs and prompt at once, the list is kept in the
// state file for the next starts of nekro, and the plugin is rebuilt and
// replaced once attached to a host (remount).
func (c *conn) relist(s *mcp.ClientSession) {
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	c.remountMu.Lock() // one list at a time, so an older one never wins
	tools, err := listTools(ctx, s)
	if err != nil {
		c.remountMu.Unlock()
		c.log.Warn("MCP server's tools could not be listed", "err", err)
		return
	}
	c.setLive(tools)
	st := state{Hash: c.hash, Tools: tools}
	if r := s.InitializeResult(); r != nil && r.ServerInfo != nil {
		st.Version = r.ServerInfo.Version
	}
	c.latest = st
	if old, _ := c.readState(); string(stateKey(old)) != string(stateKey(st)) {
		c.writeState(st)
	}
	c.remountMu.Unlock()
	c.remount()
}

// remount rebuilds the plugin from the newest tools list and puts it in
// the host, if the list differs from the mounted plugin's and a
// host is attached. A plugin that cannot replace the old one (a method
// name another plugin has) is logged, and the old one stays.
func (c *conn) remount() {
	c.remountMu.Lock()
	defer c.remountMu.Unlock()
	c.mu.Lock()
	replace, closed := c.replace, c.closed
	c.mu.Unlock()
	key := stateKey(c.latest)
	if replace == nil || closed || c.latest.Tools == nil || string(key) == string(c.builtFrom) {
		return
	}
	p, err := c.build(c.latest)
	if err == nil {
		err = replace(p)
	}
	if err != nil {
		c.log.Error("MCP server's tools changed but cannot be mounted: the runs keep the old ones", "err", err)
		return
	}
	c.builtFrom = key
	c.log.Info("MCP server's tools changed: the next runs offer them", "tools", len(c.latest.Tools))
}

func (c *conn) setLive(tools []*mcp.Tool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live = map[string]bool{}
	for _, t := range tools {
		c.live[t.Name] = true
	}
}

// stop ends the session and the server's processes; calls fail after.
func (c *conn) stop() {
	c.mu.Lock()
	c.closed = true
	s, pgid := c.sess, c.pgid
	c.sess, c.pgid = nil, 0
	c.mu.Unlock()
	if s != nil {
		s.Close()
	}
	killGroup(pgid)
}

// killGroup kills what is left of a stdio server's process group.
func killGroup(pgid int) {
	if pgid > 0 {
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// call calls a tool. The call's ctx carries its deadline (the server's
// timeout, else --call-timeout) and ends it when passed.
//
// A call on a connection found closed (the server ended, and the end was
// not yet noticed) is sent once more, to the server started again: a
// server killed in the middle of a call may see it twice.
func (c *conn) call(ctx context.Context, tool string, args map[string]any) (json.RawMessage, error) {
	var res *mcp.CallToolResult
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		var s *mcp.ClientSession
		if s, err = c.session(ctx); err != nil {
			return nil, err
		}
		res, err = s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err == nil || ctx.Err() != nil || !connectionLost(err) {
			break
		}
		c.ended(s, err)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("MCP server %s: tool %s did not answer in time: %w", c.spec.Name, tool, ctx.Err())
		}
		return nil, fmt.Errorf("MCP server %s: tool %s: %w", c.spec.Name, tool, err)
	}
	if res.IsError {
		text := contentText(res.Content)
		if text == "" {
			text = "the tool reported an error without a message"
		}
		return nil, errors.New(text)
	}
	return resultJSON(res)
}

// contentText joins a result's text contents.
func contentText(content []mcp.Content) string {
	var parts []string
	for _, c := range content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// resultJSON is what a tool's result is to the sandbox's code: its
// structured content when it gives some, else its text when all its
// content is text, else a list of its content items.
func resultJSON(res *mcp.CallToolResult) (json.RawMessage, error) {
	if res.StructuredContent != nil {
		return json.Marshal(res.StructuredContent)
	}
	allText := true
	for _, c := range res.Content {
		if _, ok := c.(*mcp.TextContent); !ok {
			allText = false
		}
	}
	if allText {
		return json.Marshal(contentText(res.Content))
	}
	var items []map[string]any
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			items = append(items, map[string]any{"type": "text", "text": c.Text})
		case *mcp.ImageContent:
			items = append(items, map[string]any{"type": "image", "mime_type": c.MIMEType, "data": base64.StdEncoding.EncodeToString(c.Data)})
		case *mcp.AudioContent:
			items = append(items, map[string]any{"type": "audio", "mime_type": c.MIMEType, "data": base64.StdEncoding.EncodeToString(c.Data)})
		case *mcp.ResourceLink:
			items = append(items, map[string]any{"type": "resource", "uri": c.URI, "name": c.Name, "mime_type": c.MIMEType})
		case *mcp.EmbeddedResource:
			item := map[string]any{"type": "resource"}
			if r := c.Resource; r != nil {
				item["uri"], item["mime_type"] = r.URI, r.MIMEType
				if r.Text != "" {
					item["text"] = r.Text
				}
				if r.Blob != nil {
					item["data"] = base64.StdEncoding.EncodeToString(r.Blob)
				}
			}
			items = append(items, item)
		}
	}
	return json.Marshal(items)
}

// childEnv is a stdio server's environment: a minimal base taken from
// nekro's (nothing that could be a secret: no NEKRO_* token or key) and
// the config's env on top.
func childEnv(extra map[string]string) []string {
	env := map[string]string{}
	for _, k := range []string{"PATH", "HOME", "USER", "LANG", "TZ", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	if _, ok := env["PATH"]; !ok {
		env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
	}
	for k, v := range extra {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// headerTransport adds the config's headers to an HTTP server's requests.
type headerTransport struct {
	headers map[string]string
	next    http.RoundTripper
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.headers {
			r.Header.Set(k, v)
		}
	}
	return h.next.RoundTrip(r)
}

// logWriter logs a server's stderr, a line at a time (cut at 4 KiB).
type logWriter struct{ log *slog.Logger }

func (w logWriter) Write(b []byte) (int, error) {
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 4096), 4096)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			w.log.Info("MCP server stderr", "line", line)
		}
	}
	return len(b), nil
}

// connectionLost reports whether a call failed because the connection to
// the server ended.
func connectionLost(err error) bool {
	return errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.EPIPE)
}
