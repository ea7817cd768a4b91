// Package rpc serves one sandbox run's method calls over its own Unix
// socket.
//
// Identity is the socket: the server is created for one run with that run's
// chat, user, container key and callable methods, and nothing in a request
// can change them. The wire format is newline-delimited JSON:
//
//	request:  {"id":1,"method":"my_sum_function","args":{"num1":2,"num2":3}}
//	response: {"id":1,"result":5}
//	      or: {"id":1,"error":{"type":"argument","message":"..."}}
//
// Error types: "argument" (a wrong or missing argument; raised as TypeError
// in Python), "plugin" (the method's own error; raised as PluginError), and
// host errors raised as NekroError: "unknown_method", "bad_request",
// "too_large", "timeout", "panic", "run_ended".
//
// A request is one line of at most Config.MaxRequest bytes (16 MiB) whose
// arrays and objects nest at most MaxDepth (64) levels deep, the request
// object itself counting as one: a deeper one is answered "bad_request"
// (with its id when it can be read) and never reaches a plugin, whose own
// decoder (Python's json, for a Python plugin) may not survive it.
package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/plugin"
)

// Defaults and limits. Together they bound what one run can make the host
// hold, whatever the code sends: at most MaxConns connections, each
// buffering one request; requests above SmallRequest bytes (up to
// MaxRequest) read and handled one at a time across the whole run;
// answers of at most MaxResult bytes; error texts cut to MaxErrorText;
// and a record of at most MaxCallRecords calls and MaxRecordBytes bytes.
// MaxDepth bounds how deeply a request nests, so that no plugin decodes
// more structure than a recursive decoder can walk.
const (
	DefaultMaxRequest  = 16 << 20
	DefaultMaxResult   = 16 << 20
	DefaultMaxConns    = 8
	DefaultCallTimeout = 60 * time.Second
	MaxCallRecords     = 10000
	// SmallRequest is the largest request served concurrently with
	// others; a larger one waits for the run's single large-request slot.
	SmallRequest = 1 << 20
	// MaxErrorText is the longest error message answered or recorded:
	// plugin errors and argument errors that echo what the code sent are
	// cut here.
	MaxErrorText = 1 << 10
	// MaxRecordBytes bounds the method names and error texts one run's
	// call record keeps; calls past it are counted in Dropped.
	MaxRecordBytes = 2 << 20
	// MaxDepth is how deeply a request's arrays and objects may nest,
	// counting the request object: its arguments get MaxDepth-2 levels.
	MaxDepth      = 64
	maxMethodName = 128
)

// Methods resolves a Python name to a method the run may call.
type Methods interface {
	Method(name string) (*pluginhost.MethodInfo, error)
}

// Config configures a run's server.
type Config struct {
	// Env is the run's identity and services. It may instead be given
	// later with Bind (a sandbox started ahead of its run); calls that
	// arrive before either are refused.
	Env         *pluginhost.RunEnv
	Methods     Methods       // checked on every call (only enabled plugins answer)
	MaxRequest  int           // bytes per request line; default 16 MiB
	MaxResult   int           // bytes per encoded result; default 16 MiB
	MaxConns    int           // open connections per run; default 8 (one per process is the norm)
	CallTimeout time.Duration // per call unless the method sets its own; default 60 s
	Log         *slog.Logger
	// DiskFullHint, if set, is added to a method's error when the method
	// failed because a disk or quota was full (ENOSPC, EDQUOT): which
	// quota it was and who sets it.
	DiskFullHint string
	// OnResult, if set, is called after each successful call, in call order,
	// with the method and its encoded result (e.g. to record BEHAVIOR
	// results as system messages as they happen).
	OnResult func(m *pluginhost.MethodInfo, result json.RawMessage)
}

// Call records one method call of the run.
type Call struct {
	Method   string        `json:"method"`
	Duration time.Duration `json:"-"`
	Micros   int64         `json:"duration_us"`
	Error    string        `json:"error,omitempty"`
}

// Ending is the call that ended the run: an AGENT or MULTIMODAL_AGENT method.
type Ending struct {
	Method string
	Type   plugin.MethodType
	Result json.RawMessage // a JSON string (AGENT) or a list of content parts
}

// Server is one run's RPC server.
type Server struct {
	cfg  Config
	ln   net.Listener
	ctx  context.Context // cancelled by Close: ends the run's calls
	stop context.CancelFunc

	// large is the run's one slot for requests above SmallRequest.
	large chan struct{}

	wg          sync.WaitGroup
	mu          sync.Mutex
	conns       map[net.Conn]struct{}
	calls       []Call
	recordBytes int // method names and errors kept in calls
	dropped     int // calls not recorded once MaxCallRecords or MaxRecordBytes were reached
	end         *Ending
	onEnd       func()
}

// Listen creates the socket at path and starts serving. Only the host user
// can connect until the socket is handed to the sandbox's uid with Chown:
// the path shows in the process table, so the mode is what keeps other
// local users from calling methods as the run's chat. Backends that can
// hand the sandbox a descriptor use ListenPassed instead, which has no
// path at all.
func Listen(ctx context.Context, path string, cfg Config) (*Server, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("rpc listen %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("rpc socket permissions: %w", err)
	}
	return serve(ctx, ln, cfg), nil
}

// serve fills cfg's defaults and serves the connections ln accepts.
func serve(ctx context.Context, ln net.Listener, cfg Config) *Server {
	if cfg.MaxRequest <= 0 {
		cfg.MaxRequest = DefaultMaxRequest
	}
	if cfg.MaxResult <= 0 {
		cfg.MaxResult = DefaultMaxResult
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s := &Server{cfg: cfg, ln: ln, ctx: sctx, stop: stop, conns: map[net.Conn]struct{}{}, large: make(chan struct{}, 1)}
	// The run's context ends the calls too.
	context.AfterFunc(ctx, stop)
	s.wg.Add(1)
	go s.accept()
	return s
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if len(s.conns) >= s.cfg.MaxConns {
			s.mu.Unlock()
			b, _ := json.Marshal(response{ID: json.RawMessage("null"), Error: &rpcError{"too_many_connections",
				fmt.Sprintf("this run already has %d connections open to the host (the limit)", s.cfg.MaxConns)}})
			c.Write(append(b, '\n'))
			c.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			c.Close()
		}()
	}
}

// Close stops accepting, cancels calls in flight and waits for the
// connections to finish. Plugin methods that ignore their context may
// still be running; their results are dropped.
func (s *Server) Close() error {
	s.stop()
	err := s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// OnEnd sets a function called once when an AGENT or MULTIMODAL_AGENT
// call ends the run (the runtime stops the rest of the run with it).
func (s *Server) OnEnd(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onEnd = f
}

// Chown gives the socket to the uid the sandbox runs as (when it is not the
// host's own), keeping it mode 0600.
func (s *Server) Chown(uid, gid int) error {
	if err := os.Chown(s.ln.Addr().String(), uid, gid); err != nil {
		return fmt.Errorf("rpc socket owner: %w", err)
	}
	return nil
}

// Bind fixes the run's identity and result callback, for a server created
// before its run was known. The sandbox cannot call before the host
// releases it, which happens after Bind.
func (s *Server) Bind(env *pluginhost.RunEnv, onResult func(m *pluginhost.MethodInfo, result json.RawMessage)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.Env = env
	s.cfg.OnResult = onResult
}

// Addr returns the socket's path.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Calls returns the calls made so far, in order: at most MaxCallRecords
// (and MaxRecordBytes); Dropped says how many more were made.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Dropped returns how many calls were made beyond what the record keeps.
func (s *Server) Dropped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Ending returns the AGENT or MULTIMODAL_AGENT call that ended the run, or nil.
func (s *Server) Ending() *Ending {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.end
}

type request struct {
	ID     json.RawMessage            `json:"id"`
	Method string                     `json:"method"`
	Args   map[string]json.RawMessage `json:"args"`
}

type rpcError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type response struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
}

var errTooLarge = errors.New("request too large")

// readLine reads one newline-terminated line of at most max bytes. Once
// the line grows past SmallRequest bytes, grow is called first (it waits
// for the run's large-request slot) and may refuse. An oversized line is
// consumed and errTooLarge returned, so the connection stays usable.
func readLine(r *bufio.Reader, max int, grow func() error) ([]byte, error) {
	var line []byte
	tooLarge, grown := false, false
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLarge {
			n := len(line) + len(chunk)
			if n > SmallRequest && !grown {
				if gerr := grow(); gerr != nil {
					return nil, gerr
				}
				grown = true
			}
			if n > max+1 {
				tooLarge = true
				line = nil
			} else {
				line = append(line, chunk...)
			}
		}
		switch {
		case err == nil:
			if tooLarge {
				return nil, errTooLarge
			}
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			if len(line) > 0 && err == io.EOF && !tooLarge {
				return line, nil
			}
			return nil, err
		}
	}
}

func (s *Server) serveConn(c net.Conn) {
	r := bufio.NewReaderSize(c, 64<<10)
	w := bufio.NewWriterSize(c, 64<<10)
	holding := false
	takeLarge := func() error {
		select {
		case s.large <- struct{}{}:
			holding = true
			return nil
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
	}
	for {
		line, err := readLine(r, s.cfg.MaxRequest, takeLarge)
		var resp response
		switch {
		case errors.Is(err, errTooLarge):
			resp.Error = &rpcError{"too_large", fmt.Sprintf("request larger than the %d MiB limit", s.cfg.MaxRequest>>20)}
			resp.ID = json.RawMessage("null")
		case err != nil:
			if holding {
				<-s.large
			}
			return
		default:
			resp = s.handle(line)
		}
		line = nil
		err = writeResponse(w, resp)
		if holding {
			<-s.large
			holding = false
		}
		if err != nil {
			return
		}
	}
}

// writeResponse writes resp as one line. A result is written as it is,
// not copied into a new encoding: it is already valid JSON.
func writeResponse(w *bufio.Writer, resp response) error {
	if resp.Error == nil && resp.Result != nil {
		w.WriteString(`{"id":`)
		w.Write(resp.ID)
		w.WriteString(`,"result":`)
		w.Write(resp.Result)
		w.WriteString("}\n")
		return w.Flush()
	}
	b, err := json.Marshal(resp)
	if err != nil {
		b, _ = json.Marshal(response{ID: resp.ID, Error: &rpcError{"bad_request", "result cannot be encoded: " + err.Error()}})
	}
	w.Write(b)
	w.WriteByte('\n')
	return w.Flush()
}

// cutText cuts s to at most max bytes on a UTF-8 boundary, saying how
// much was left out.
func cutText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max - 40
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... [%d bytes cut]", s[:cut], len(s)-cut)
}

func (s *Server) handle(line []byte) response {
	var req request
	if depth := nestingDepth(line, MaxDepth); depth > MaxDepth {
		var idOnly struct {
			ID json.RawMessage `json:"id"`
		}
		id := json.RawMessage("null")
		if json.Unmarshal(line, &idOnly) == nil && idOnly.ID != nil {
			id = idOnly.ID
		}
		return response{ID: id, Error: &rpcError{"bad_request",
			fmt.Sprintf("malformed request: arrays and objects nested more than %d levels deep (the limit)", MaxDepth)}}
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&req); err != nil {
		return response{ID: json.RawMessage("null"), Error: &rpcError{"bad_request", "malformed request: " + err.Error()}}
	}
	if req.ID == nil {
		req.ID = json.RawMessage("null")
	}
	resp := response{ID: req.ID}
	start := time.Now()
	result, m, rerr := s.call(req)
	d := time.Since(start)
	name := req.Method
	if !validMethodName(name) {
		name = "?" // never keep what a hostile request put there
	}
	call := Call{Method: name, Duration: d, Micros: d.Microseconds()}
	if rerr != nil {
		rerr.Message = cutText(rerr.Message, MaxErrorText)
		call.Error = rerr.Message
		resp.Error = rerr
	} else {
		resp.Result = result
	}
	s.mu.Lock()
	if size := len(call.Method) + len(call.Error); len(s.calls) < MaxCallRecords && s.recordBytes+size <= MaxRecordBytes {
		s.calls = append(s.calls, call)
		s.recordBytes += size
	} else {
		s.dropped++
	}
	onResult := s.cfg.OnResult
	s.mu.Unlock()
	if rerr == nil && onResult != nil {
		onResult(m, result)
	}
	return resp
}

func (s *Server) call(req request) (json.RawMessage, *pluginhost.MethodInfo, *rpcError) {
	if !validMethodName(req.Method) {
		name := req.Method
		if len(name) > 40 {
			name = name[:40] + "..."
		}
		return nil, nil, &rpcError{"bad_request", fmt.Sprintf("%q is not a method name", name)}
	}
	m, err := s.cfg.Methods.Method(req.Method)
	if err != nil {
		return nil, nil, &rpcError{"unknown_method", fmt.Sprintf("%s(): %v (not provided by any enabled plugin)", req.Method, err)}
	}
	s.mu.Lock()
	ended, env := s.end, s.cfg.Env
	s.mu.Unlock()
	if env == nil {
		return nil, m, &rpcError{"run_ended", fmt.Sprintf("%s(): the run has not started", req.Method)}
	}
	if ended != nil {
		return nil, m, &rpcError{"run_ended", fmt.Sprintf("%s(): the run already ended with agent method %s", req.Method, ended.Method)}
	}
	timeout := s.cfg.CallTimeout
	if m.Timeout > 0 {
		timeout = m.Timeout
	}
	cctx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	type outcome struct {
		result json.RawMessage
		err    error
		panic  any
		stack  []byte
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- outcome{panic: v, stack: debug.Stack()}
			}
		}()
		res, err := pluginhost.Call(m, pluginhost.NewCtx(cctx, m.Plugin(), env), req.Args)
		done <- outcome{result: res, err: err}
	}()
	var o outcome
	select {
	case o = <-done:
	case <-cctx.Done():
		if s.ctx.Err() != nil {
			return nil, m, &rpcError{"run_ended", fmt.Sprintf("%s(): the run ended before the method answered", req.Method)}
		}
		s.cfg.Log.Warn("plugin method overran its deadline", "run", env.RunID, "plugin", m.Plugin().Key(), "method", m.Name, "timeout", timeout)
		return nil, m, &rpcError{"timeout", fmt.Sprintf("%s(): the method did not answer within %s", req.Method, timeout)}
	}
	if o.panic != nil {
		s.cfg.Log.Error("plugin method panicked", "run", env.RunID, "plugin", m.Plugin().Key(), "method", m.Name, "panic", o.panic, "stack", string(o.stack))
		return nil, m, &rpcError{"panic", fmt.Sprintf("%s(): the plugin method failed with an internal error (panic: %v)", req.Method, o.panic)}
	}
	if o.err != nil {
		var ae *plugin.ArgumentError
		if errors.As(o.err, &ae) {
			return nil, m, &rpcError{"argument", ae.Error()}
		}
		msg := o.err.Error()
		if s.cfg.DiskFullHint != "" && (errors.Is(o.err, syscall.ENOSPC) || errors.Is(o.err, syscall.EDQUOT)) {
			msg += " (" + s.cfg.DiskFullHint + ")"
		}
		return nil, m, &rpcError{"plugin", msg}
	}
	if len(o.result) > s.cfg.MaxResult {
		return nil, m, &rpcError{"too_large", fmt.Sprintf("%s(): the method's result is %d bytes, over the %d MiB limit", req.Method, len(o.result), s.cfg.MaxResult>>20)}
	}
	if m.Type.EndsRun() {
		s.mu.Lock()
		if s.end != nil {
			s.mu.Unlock()
			return nil, m, &rpcError{"run_ended", fmt.Sprintf("%s(): the run already ended with agent method %s", req.Method, s.end.Method)}
		}
		s.end = &Ending{Method: m.Name, Type: m.Type, Result: o.result}
		onEnd := s.onEnd
		s.mu.Unlock()
		if onEnd != nil {
			onEnd()
		}
	}
	return o.result, m, nil
}

// nestingDepth returns how deeply the JSON text b nests arrays and
// objects, counting up to just past max (it stops there). Brackets inside
// strings do not count; b need not be valid JSON (the decoder judges that).
func nestingDepth(b []byte, max int) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			if depth > deepest {
				deepest = depth
				if deepest > max {
					return deepest
				}
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// validMethodName reports whether name can be a sandbox method's name: a
// Python identifier of at most 128 bytes. Anything else is refused before
// it is looked up, recorded or echoed.
func validMethodName(name string) bool {
	if name == "" || len(name) > maxMethodName {
		return false
	}
	for i, r := range name {
		switch {
		case r == '_', 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
		case '0' <= r && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
