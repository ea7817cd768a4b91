// Package mcp puts nekro on both ends of the Model Context Protocol, with
// the official Go SDK.
//
// Server: the enabled plugins' sandbox methods, as one chat's code sees
// them, become MCP tools (`nekro mcp` on stdio, /mcp on `nekro serve`).
// Each tool's input schema is made from the method's parameters (their
// Python types, which come from the Go argument struct or a Python
// plugin's annotations) and its description is the doc text the AI reads.
// Every call runs as one identity, a chat and a user the host chose (the
// command's flags, the HTTP request's token and query), never one the
// client's arguments name; it goes through the sandbox's own RPC server
// (package rpc), so deadlines, result caps, error cuts and panics behave
// exactly as for sandboxed code. A client that asks for progress (a
// progress token) gets the method's ctx.Progress reports.
//
// Client: the MCP servers the operator lists in a config file (the
// format desktop MCP clients read) become plugins mcp.NAME whose tools are
// TOOL methods NAME_TOOL; see Load.
package mcp

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/host"
	"github.com/nekro-go/nekro/internal/keys"
	"github.com/nekro-go/nekro/internal/kv"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/pysig"
	"github.com/nekro-go/nekro/internal/rpc"
	"github.com/nekro-go/nekro/internal/users"
	"github.com/nekro-go/nekro/plugin"
)

// MetaMethodType is the _meta key of every tool result (and tool) naming
// the nekro method type behind it: TOOL, AGENT, BEHAVIOR or
// MULTIMODAL_AGENT. An AGENT result is what the sandbox would hand the
// model for a new round; a BEHAVIOR result is also recorded in the chat
// as a system message, as a sandbox call's is.
const MetaMethodType = "nekro/method_type"

// ServerConfig is what a Server calls methods with.
type ServerConfig struct {
	// Host hosts the plugins whose methods are served.
	Host  *host.Host
	Store *kv.Store
	Chats *chat.Service
	// Files tunes the file bridge of the calls (as the runtime's).
	Files files.Options
	// CallTimeout bounds a call unless its method sets its own; zero is
	// the sandbox's default (rpc.DefaultCallTimeout).
	CallTimeout time.Duration
	// Version is reported to clients.
	Version string
	Log     *slog.Logger
}

// Identity is who every call of an MCP session runs as: the chat its
// methods act in (ctx.ChatKey) and the user (ctx.UserID, may be empty).
type Identity struct {
	ChatKey, UserID string
}

// Check refuses a chat or user key the store would refuse.
func (id Identity) Check() error {
	if err := keys.Scope("chat", id.ChatKey); err != nil {
		return err
	}
	if id.UserID != "" {
		return keys.Scope("user", id.UserID)
	}
	return nil
}

// Server serves the enabled plugins' methods over MCP.
type Server struct {
	cfg ServerConfig
	log *slog.Logger

	mu       sync.Mutex
	handlers map[Identity]*mcp.StreamableHTTPHandler
}

// NewServer returns a server of the host's plugins.
func NewServer(cfg ServerConfig) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	return &Server{cfg: cfg, log: cfg.Log, handlers: map[Identity]*mcp.StreamableHTTPHandler{}}
}

// For returns an MCP server whose every call runs as id. Its tools are
// the methods id's chat sees now (enabled plugins, after their method
// filters), brought up to date whenever a client lists or calls them.
func (s *Server) For(id Identity) (*mcp.Server, error) {
	if err := id.Check(); err != nil {
		return nil, fmt.Errorf("mcp identity: %w", err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "nekro", Title: "nekro plugins", Version: s.cfg.Version},
		&mcp.ServerOptions{
			Instructions: fmt.Sprintf("Tools of nekro's enabled plugins. Every call acts in chat %q%s; "+
				"a chat_key argument may be left out (it is this chat) and another chat is refused.", id.ChatKey, userNote(id)),
			Logger: s.log,
		})
	b := &binding{s: s, id: id, srv: srv, listed: map[string]*pluginhost.MethodInfo{}}
	b.sync(context.Background())
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" || method == "tools/call" {
				b.sync(ctx)
			}
			return next(ctx, method, req)
		}
	})
	return srv, nil
}

func userNote(id Identity) string {
	if id.UserID == "" {
		return " with no user"
	}
	return fmt.Sprintf(" as user %q", id.UserID)
}

// ServeStdio serves MCP on stdin and stdout as id until the client
// disconnects or ctx ends.
func (s *Server) ServeStdio(ctx context.Context, id Identity) error {
	srv, err := s.For(id)
	if err != nil {
		return err
	}
	return srv.Run(ctx, &mcp.StdioTransport{})
}

// Handler serves MCP over streamable HTTP. identify names the identity
// of a request, or refuses it with an HTTP status and a message; the
// caller has authenticated it. Sessions are kept per identity: a session
// id is found only by requests of the identity that opened it.
func (s *Server) Handler(identify func(r *http.Request) (Identity, int, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, status, err := identify(r)
		if err == nil {
			err = id.Check()
			status = http.StatusBadRequest
		}
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		s.handlerFor(id).ServeHTTP(w, r)
	})
}

func (s *Server) handlerFor(id Identity) *mcp.StreamableHTTPHandler {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.handlers[id]; h != nil {
		return h
	}
	srv, _ := s.For(id) // id was checked
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Logger: s.log, SessionTimeout: 30 * time.Minute,
			MaxRequestBodyBytes: rpc.DefaultMaxRequest})
	s.handlers[id] = h
	return h
}

// binding is one identity's MCP server and the methods it lists.
type binding struct {
	s   *Server
	id  Identity
	srv *mcp.Server

	mu     sync.Mutex
	listed map[string]*pluginhost.MethodInfo
}

// visible returns the methods id's chat may call now: the enabled
// plugins', each plugin's method filter applied as for a turn
// (Host.ChatMethods: a filter that fails or is late shows all).
func (s *Server) visible(ctx context.Context, id Identity) []*pluginhost.MethodInfo {
	return s.cfg.Host.ChatMethods(ctx, id.ChatKey, id.UserID)
}

// sync brings the server's tools to the methods the chat sees now.
func (b *binding) sync(ctx context.Context) {
	now := b.s.visible(ctx, b.id)
	b.mu.Lock()
	defer b.mu.Unlock()
	seen := map[string]bool{}
	for _, m := range now {
		seen[m.Name] = true
		if b.listed[m.Name] == m {
			continue
		}
		b.listed[m.Name] = m
		b.srv.AddTool(b.s.tool(m), b.handler(m))
	}
	var gone []string
	for name := range b.listed {
		if !seen[name] {
			gone = append(gone, name)
			delete(b.listed, name)
		}
	}
	if len(gone) > 0 {
		b.srv.RemoveTools(gone...)
	}
}

// current returns the method name names if the chat may call it now.
func (b *binding) current(ctx context.Context, name string) *pluginhost.MethodInfo {
	for _, m := range b.s.visible(ctx, b.id) {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// tool describes m as an MCP tool: its Python name, its doc text (with
// its signature, the Args block made from the parameters), and the input
// schema of its parameters.
func (s *Server) tool(m *pluginhost.MethodInfo) *mcp.Tool {
	desc := pysig.Signature(m) + "\n\n" + pysig.Doc(m)
	if m.Type.EndsRun() {
		desc += "\n\n(" + m.Type.String() + " method: in a sandbox run it ends the run and its result goes to the model.)"
	} else if m.Type == plugin.Behavior {
		desc += "\n\n(BEHAVIOR method: its result is also recorded in the chat as a system message.)"
	}
	return &mcp.Tool{
		Name: m.Name, Title: m.Description, Description: desc,
		InputSchema: inputSchema(m),
		Meta:        mcp.Meta{MetaMethodType: m.Type.String(), "nekro/plugin": m.Plugin().Key()},
	}
}

// handler calls m as b's identity.
func (b *binding) handler(m *pluginhost.MethodInfo) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if cur := b.current(ctx, m.Name); cur != m {
			return errorResult(m, "unknown_method", fmt.Sprintf("%s(): not callable in chat %s now (its plugin is disabled or filters it out)",
				m.Name, b.id.ChatKey)), nil
		}
		args := map[string]json.RawMessage{}
		if raw := req.Params.Arguments; len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, &args); err != nil {
				return errorResult(m, "argument", fmt.Sprintf("%s(): arguments must be a JSON object: %v", m.Name, err)), nil
			}
		}
		// The chat's code always passes its own key (_ck); a client need not.
		for _, p := range m.Params() {
			if p.Name == "chat_key" {
				if _, ok := args["chat_key"]; !ok {
					args["chat_key"], _ = json.Marshal(b.id.ChatKey)
				}
			}
		}
		result, rerr := b.s.dispatch(ctx, b.id, m, args, progressOf(ctx, req))
		if rerr != nil {
			return errorResult(m, rerr.Type, rerr.Message), nil
		}
		return toolResult(m, result), nil
	}
}

// rpcError is a failed call as the run's RPC server answers it.
type rpcError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// dispatch calls m with args as id through a run's RPC server of its
// own, the one sandboxed code calls through: same deadline (the
// method's, else the call timeout), result cap, error cut, panic
// recovery, and enabled check at the time of the call. progress, when
// not nil, receives the method's ctx.Progress reports.
func (s *Server) dispatch(ctx context.Context, id Identity, m *pluginhost.MethodInfo, args map[string]json.RawMessage,
	progress pluginhost.TaskControl) (json.RawMessage, *rpcError) {
	env, snd, err := s.env(id)
	if err != nil {
		return nil, &rpcError{"bad_request", err.Error()}
	}
	env.Task = progress
	srv, ctl, err := rpc.ListenPassed(ctx, rpc.Config{Env: env, Methods: onlyMethod{s: s, m: m},
		CallTimeout: s.cfg.CallTimeout, Log: s.log,
		OnResult: func(m *pluginhost.MethodInfo, result json.RawMessage) {
			if m.Type == plugin.Behavior && snd != nil {
				var text string
				if json.Unmarshal(result, &text) != nil {
					text = string(result)
				}
				if _, err := snd.Record(context.WithoutCancel(ctx), text); err != nil {
					s.log.Warn("record method result", "method", m.Name, "err", err)
				}
			}
		}})
	if err != nil {
		return nil, &rpcError{"bad_request", err.Error()}
	}
	defer srv.Close()
	defer ctl.Close()
	conn, err := connect(ctl)
	if err != nil {
		return nil, &rpcError{"bad_request", err.Error()}
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	req, _ := json.Marshal(map[string]any{"id": 1, "method": m.Name, "args": args})
	if _, err := conn.Write(append(req, '\n')); err != nil {
		return nil, &rpcError{"run_ended", fmt.Sprintf("%s(): %v", m.Name, err)}
	}
	r := bufio.NewReaderSize(conn, 64<<10)
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  *rpcError       `json:"error"`
	}
	line, err := r.ReadBytes('\n')
	if err != nil {
		if ctx.Err() != nil {
			return nil, &rpcError{"run_ended", fmt.Sprintf("%s(): the request was cancelled", m.Name)}
		}
		return nil, &rpcError{"run_ended", fmt.Sprintf("%s(): no answer: %v", m.Name, err)}
	}
	if err := json.Unmarshal(line, &resp); err != nil {
		return nil, &rpcError{"bad_request", fmt.Sprintf("%s(): bad answer: %v", m.Name, err)}
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	return resp.Result, nil
}

// progressOf returns where a call's ctx.Progress reports go: to the
// client as notifications/progress when its request carries a progress
// token, else nowhere (nil: the method's Ctx is then outside any task, as
// in a sandbox run, and Progress does nothing).
func progressOf(ctx context.Context, req *mcp.CallToolRequest) pluginhost.TaskControl {
	tok := req.Params.GetProgressToken()
	if tok == nil || req.Session == nil {
		return nil
	}
	return &clientProgress{ctx: ctx, session: req.Session, token: tok, last: -1}
}

// clientProgress sends a method's progress reports to the MCP client as
// notifications/progress of total 100. A report that does not go beyond
// the last one sent is dropped (MCP requires progress to increase), and
// reports after the call has ended go nowhere. A call from an MCP client
// is no background task: WaitNotify fails.
type clientProgress struct {
	ctx     context.Context
	session *mcp.ServerSession
	token   any

	mu   sync.Mutex
	last int
}

func (c *clientProgress) Progress(percent int, message string) {
	percent = min(max(percent, 0), 100)
	c.mu.Lock()
	defer c.mu.Unlock()
	if percent <= c.last || c.ctx.Err() != nil {
		return
	}
	c.last = percent
	c.session.NotifyProgress(c.ctx, &mcp.ProgressNotificationParams{ProgressToken: c.token,
		Progress: float64(percent), Total: 100, Message: message})
}

func (c *clientProgress) Wait(context.Context, string, time.Duration) (string, error) {
	return "", fmt.Errorf("wait for a notification: %w (only a background task waits, not a call from an MCP client)", plugin.ErrNoService)
}

// onlyMethod lets a call reach m alone, and only while the registry
// still has it enabled.
type onlyMethod struct {
	s *Server
	m *pluginhost.MethodInfo
}

func (o onlyMethod) Method(name string) (*pluginhost.MethodInfo, error) {
	m, err := o.s.cfg.Host.Registry().Method(name)
	if err != nil {
		return nil, err
	}
	if m != o.m {
		return nil, fmt.Errorf("method %q is not the one called", name)
	}
	return m, nil
}

// connect asks a run's control socket for a connection, as the sandbox
// does: one byte out, a stream socket back as SCM_RIGHTS.
func connect(ctl *os.File) (net.Conn, error) {
	raw, err := ctl.SyscallConn()
	if err != nil {
		return nil, err
	}
	var fd int = -1
	var opErr error
	err = raw.Control(func(c uintptr) {
		if opErr = unix.Sendmsg(int(c), []byte{'c'}, nil, nil, 0); opErr != nil {
			return
		}
		buf := make([]byte, 1)
		oob := make([]byte, unix.CmsgSpace(4))
		_, oobn, _, _, err := unix.Recvmsg(int(c), buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err != nil {
			opErr = err
			return
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) != 1 {
			opErr = fmt.Errorf("no connection passed (%v)", err)
			return
		}
		fds, err := unix.ParseUnixRights(&msgs[0])
		if err != nil || len(fds) != 1 {
			opErr = fmt.Errorf("no connection passed (%v)", err)
			return
		}
		fd = fds[0]
	})
	if err == nil {
		err = opErr
	}
	if err != nil {
		return nil, fmt.Errorf("connect to the call's rpc server: %w", err)
	}
	f := os.NewFile(uintptr(fd), "mcp-rpc")
	defer f.Close()
	return net.FileConn(f)
}

// env is what a call as id may use: the store, the chat's file bridge,
// and the chat (what the method sends lands in its history).
func (s *Server) env(id Identity) (*pluginhost.RunEnv, *chat.RunSender, error) {
	env := &pluginhost.RunEnv{RunInfo: plugin.RunInfo{RunID: "mcp", ChatKey: id.ChatKey, UserID: id.UserID,
		ContainerKey: files.ContainerKey(id.ChatKey)}}
	if s.cfg.Store != nil {
		env.StoreFor = func(p *plugin.Plugin) plugin.Store { return s.cfg.Store.For(p.Key()) }
	}
	fsys, err := files.NewFS(s.cfg.Host.Runtime().Layout(), env.RunInfo, s.cfg.Files)
	if err != nil {
		return nil, nil, err
	}
	env.FS = fsys
	env.Knowledge = s.cfg.Host.Runtime().KnowledgeFor(id.ChatKey)
	var snd *chat.RunSender
	if s.cfg.Chats != nil {
		snd = s.cfg.Chats.Sender(id.ChatKey, 0)
		env.Chat = screened{RunSender: snd, host: s.cfg.Host, chatKey: id.ChatKey}
	}
	return env, snd, nil
}

// screened passes system messages through the plugins' OnSystemMessage
// hooks, as a sandbox run's are.
type screened struct {
	*chat.RunSender
	host    *host.Host
	chatKey string
}

func (s screened) AddSystem(ctx context.Context, text string, wake bool) error {
	switch s.host.SystemMessageSignal(ctx, s.chatKey, text) {
	case plugin.BlockAll:
		return nil
	case plugin.BlockTrigger:
		wake = false
	case plugin.ForceTrigger:
		wake = true
	}
	return s.RunSender.AddSystem(ctx, text, wake)
}

// errorResult is a failed call: a tool error (isError) carrying the
// message as the sandbox's code would read it.
func errorResult(m *pluginhost.MethodInfo, kind, msg string) *mcp.CallToolResult {
	prefix := "NekroError"
	switch kind {
	case "argument":
		prefix = "TypeError"
	case "plugin":
		prefix = "PluginError"
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: prefix + ": " + msg}},
		Meta: mcp.Meta{MetaMethodType: m.Type.String(), "nekro/error_type": kind}}
}

// toolResult maps a method's JSON result to MCP content: a string as
// text, any other TOOL value as its JSON text (an object also as
// structuredContent), a MULTIMODAL_AGENT result's parts as text, images
// (data: URLs) and resource links (http(s) URLs).
func toolResult(m *pluginhost.MethodInfo, result json.RawMessage) *mcp.CallToolResult {
	out := &mcp.CallToolResult{Meta: mcp.Meta{MetaMethodType: m.Type.String()}, Content: []mcp.Content{}}
	if m.Type == plugin.MultimodalAgent {
		var parts []plugin.ContentPart
		json.Unmarshal(result, &parts)
		for i, p := range parts {
			switch {
			case p.Type == "text":
				out.Content = append(out.Content, &mcp.TextContent{Text: p.Text})
			case p.ImageURL != nil && strings.HasPrefix(p.ImageURL.URL, "data:"):
				mime, data, err := decodeDataURL(p.ImageURL.URL)
				if err != nil {
					out.Content = append(out.Content, &mcp.TextContent{Text: fmt.Sprintf("[image %d could not be decoded: %v]", i, err)})
					continue
				}
				out.Content = append(out.Content, &mcp.ImageContent{Data: data, MIMEType: mime})
			case p.ImageURL != nil:
				out.Content = append(out.Content, &mcp.ResourceLink{URI: p.ImageURL.URL, Name: fmt.Sprintf("image-%d", i+1)})
			}
		}
		return out
	}
	var text string
	if json.Unmarshal(result, &text) == nil {
		out.Content = append(out.Content, &mcp.TextContent{Text: text})
		return out
	}
	out.Content = append(out.Content, &mcp.TextContent{Text: string(result)})
	if len(result) > 0 && result[0] == '{' {
		out.StructuredContent = result
	}
	return out
}

// decodeDataURL returns the media type and bytes of a base64 data: URL.
func decodeDataURL(u string) (string, []byte, error) {
	meta, data, ok := strings.Cut(strings.TrimPrefix(u, "data:"), ",")
	if !ok || !strings.HasSuffix(meta, ";base64") {
		return "", nil, errors.New("not a base64 data: URL")
	}
	b, err := base64.StdEncoding.DecodeString(data)
	return strings.TrimSuffix(meta, ";base64"), b, err
}

// HTTPIdentity names the identity of an authenticated /mcp request: the
// chat from ?chat= (or the X-Nekro-Chat header), required; the user from
// the request's token when it is a user's (users.FromContext; the chat
// must then be one the user belongs to, isMember says), else from ?user=
// (or X-Nekro-User) for the operator's token. Query and headers repeat on
// every request of a session, and a session is found only by requests of
// the identity that opened it (Handler).
func HTTPIdentity(isMember func(ctx context.Context, chatKey, userID string) (bool, error)) func(r *http.Request) (Identity, int, error) {
	return func(r *http.Request) (Identity, int, error) {
		q := r.URL.Query()
		id := Identity{ChatKey: q.Get("chat"), UserID: q.Get("user")}
		if id.ChatKey == "" {
			id.ChatKey = r.Header.Get("X-Nekro-Chat")
		}
		if id.UserID == "" {
			id.UserID = r.Header.Get("X-Nekro-User")
		}
		if id.ChatKey == "" {
			return id, http.StatusBadRequest, errors.New("name the chat every call acts in: /mcp?chat=CHAT (and &user=USER), or the X-Nekro-Chat header")
		}
		who, ok := users.FromContext(r.Context())
		if !ok || who.Admin {
			return id, 0, nil
		}
		if id.UserID != "" && id.UserID != who.UserID {
			return id, http.StatusForbidden, fmt.Errorf("a user token calls as its own user (%s), not %s", who.UserID, id.UserID)
		}
		id.UserID = who.UserID
		if isMember == nil {
			return id, http.StatusForbidden, errors.New("user tokens cannot use /mcp here")
		}
		member, err := isMember(r.Context(), id.ChatKey, id.UserID)
		if err != nil {
			return id, http.StatusServiceUnavailable, err
		}
		if !member {
			return id, http.StatusNotFound, fmt.Errorf("no such chat: %s (or you are not one of its members)", id.ChatKey)
		}
		return id, 0, nil
	}
}
