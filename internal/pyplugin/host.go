package pyplugin

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nekro-go/nekro/internal/pluginconfig"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/plugin"
)

// maxLine bounds one message either way (a method's result, a stored
// value): the sandbox RPC's request limit.
const maxLine = 16 << 20

// Restart backoff after a process ended unexpectedly.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// deadlineMargin is how long before a call's deadline a silent process
// is taken out of service (at most a tenth of the time the call has).
const deadlineMargin = 25 * time.Millisecond

// hookFlags says which hooks a Python plugin mounted.
type hookFlags struct {
	Init, Cleanup, Reset bool
	PromptInject         bool `json:"prompt_inject"`
	CollectMethods       bool `json:"collect_methods"`
	UserMessage          bool `json:"user_message"`
	SystemMessage        bool `json:"system_message"`
	Enabled, Disabled    bool
}

// hello is what a plugin process says first.
type hello struct {
	// Error, with where it was raised, says why the plugin did not load.
	Error     string `json:"error"`
	ErrorType string `json:"error_type"`
	File      string `json:"file"`
	Line      int    `json:"line"`
	Traceback string `json:"traceback"`
	Plugin    struct {
		Name, Description, Version, Author, URL string
		ModuleName                              string `json:"module_name"`
	} `json:"plugin"`
	Methods []struct {
		Name        string `json:"name"`
		Type        string `json:"type"`
		DisplayName string `json:"display_name"`
		Description string `json:"description"`
		Doc         string `json:"doc"`
		Result      string `json:"result"`
		Params      []struct {
			Name      string `json:"name"`
			PyType    string `json:"py_type"`
			Optional  bool   `json:"optional"`
			DefaultPy string `json:"default_py"`
		} `json:"params"`
	} `json:"methods"`
	// Commands are the plugin's mount_command and command-group
	// commands, their permission already in nekro's terms.
	Commands []struct {
		Name        string   `json:"name"`
		Description string   `json:"description"`
		Aliases     []string `json:"aliases"`
		Permission  string   `json:"permission"`
		Usage       string   `json:"usage"`
		Hidden      bool     `json:"hidden"`
	} `json:"commands"`
	Hooks  hookFlags       `json:"hooks"`
	Config json.RawMessage `json:"config"` // the ConfigBase class's fields (pluginconfig.Field), or null
	// Router says the plugin serves a web router (mount_router, web.go).
	Router bool `json:"router"`
}

// message is any line either way.
type message struct {
	ID     *int64          `json:"id,omitempty"`
	Req    *int64          `json:"req,omitempty"`
	Op     string          `json:"op,omitempty"`
	Call   string          `json:"call,omitempty"`
	Args   json.RawMessage `json:"args,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
	// log lines
	Level string `json:"level,omitempty"`
	Msg   string `json:"msg,omitempty"`
}

// callError is a failure the plugin reported.
type callError struct {
	Type      string `json:"type"` // "plugin" or "argument"
	Message   string `json:"message"`
	Traceback string `json:"traceback"`
}

// host is one plugin's process, restarted when it dies.
type host struct {
	path, python, pkgDir string
	index, envDir        string // dynamic_import_pkg: where from, and where to
	pluginsDir           string // data/plugins, for get_plugin_data_dir at import time
	startTimeout         time.Duration
	installTimeout       time.Duration // of the plugin's requirements (env.go)
	log                  *slog.Logger
	plugin               *plugin.Plugin
	hooks                hookFlags
	history              *historySource // the chats' messages, for DBChatMessage
	queries              *querySource   // the chat platforms' read-only queries, for get_bot
	stores               *storeSource   // the knowledge base and the memories, for kb and memory services
	memoryOn             bool           // Options.Memory, for is_memory_system_enabled

	mu      sync.Mutex
	proc    *process // nil while restarting
	ready   chan struct{}
	closed  bool
	backoff time.Duration
	calls   map[string]*plugin.Ctx // in-flight calls by token, for the plugin's requests
	// readers are in-flight turn hooks (prompt_inject, collect_methods) by
	// token: their chat's knowledge and memories may be read, nothing else
	// acts for it.
	readers map[string]*plugin.Ctx
	// strikes are the chats whose calls ended the process (blame.go);
	// suspects, those whose next call runs alone (through gate).
	strikes  map[string]strike
	suspects map[string]bool
	gate     callGate
	// active counts the calls and hook requests under way; once retired
	// (live.go), new ones go to next (the reloaded plugin's host), or fail
	// when the plugin was removed.
	active  int
	retired bool
	next    *host
	// retiredCh is closed when the host is retired: its open web
	// streams end, and their clients reconnect to the new version.
	retiredCh chan struct{}
	bodySlots chan struct{} // web requests' bodies being taken in (web.go)
	inited    bool          // the plugin's init ran in this host
}

// process is one run of the plugin's Python process.
type process struct {
	cmd     *exec.Cmd
	conn    net.Conn
	wmu     sync.Mutex
	nextID  int64
	pmu     sync.Mutex
	pending map[int64]chan message
	hello   chan message
	done    chan struct{} // closed when the process has ended
	exitErr error
	started time.Time
	// inflight are the chats of the sandbox calls sent and not answered,
	// by request id; culprit is the chat of a call whose deadline the
	// process missed (it was killed for it). judge reads both once the
	// process has ended and leaves its verdict before done is closed.
	inflight map[int64]string
	culprit  string
	verdict  *verdict
	// streams are the web requests under way, by request id (web.go).
	streams map[int64]*stream
}

// load starts the process and builds the plugin it describes.
func (h *host) load(ctx context.Context) (*plugin.Plugin, error) {
	h.calls = map[string]*plugin.Ctx{}
	h.readers = map[string]*plugin.Ctx{}
	h.strikes, h.suspects = map[string]strike{}, map[string]bool{}
	h.retiredCh = make(chan struct{})
	h.bodySlots = make(chan struct{}, routeBodies)
	p, hl, err := h.start(ctx)
	if err != nil {
		return nil, err
	}
	if err := h.build(hl); err != nil {
		h.mu.Lock()
		h.closed = true
		h.mu.Unlock()
		p.kill()
		return nil, err
	}
	h.mu.Lock()
	h.proc, h.ready = p, closedChan()
	h.mu.Unlock()
	go h.supervise(p)
	return h.plugin, nil
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// start runs the process and reads its hello.
func (h *host) start(ctx context.Context) (*process, *hello, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	ours := os.NewFile(uintptr(fds[0]), "nekro-plugin")
	theirs := os.NewFile(uintptr(fds[1]), "nekro-plugin-child")
	defer theirs.Close()
	conn, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("plugin connection: %w", err)
	}
	python, err := h.prepareEnv(ctx)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	// The process's own temporary directory (TMPDIR): private (0700),
	// removed when the process ends. Each call's copy of the files it
	// touches in /app/shared is made there, out of the sandbox's reach.
	tmpRoot := filepath.Join(filepath.Dir(h.pkgDir), "tmp")
	if err := os.MkdirAll(tmpRoot, 0o700); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("plugin temporary directory: %w", err)
	}
	tmp, err := os.MkdirTemp(tmpRoot, "proc-")
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("plugin temporary directory: %w", err)
	}
	cmd := exec.Command(python, "-u", "-B", "-m", "nekro_agent._host", h.path, "3", h.envDir, h.index, h.pluginsDir)
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.Env = append(pluginEnv(h.pkgDir), "TMPDIR="+tmp)
	cmd.Dir = filepath.Dir(h.path)
	cmd.Stdout = logWriter{h.log, slog.LevelInfo}
	cmd.Stderr = logWriter{h.log, slog.LevelWarn}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		conn.Close()
		os.RemoveAll(tmp)
		return nil, nil, fmt.Errorf("start %s: %w", python, err)
	}
	p := &process{cmd: cmd, conn: conn, pending: map[int64]chan message{}, hello: make(chan message, 1),
		done: make(chan struct{}), started: time.Now(), inflight: map[int64]string{}}
	go func() {
		p.exitErr = cmd.Wait()
		conn.Close()
		os.RemoveAll(tmp)
		h.judge(p)
		close(p.done)
	}()
	go h.read(p)
	timer := time.NewTimer(h.startTimeout)
	defer timer.Stop()
	select {
	case m := <-p.hello:
		var hl hello
		if err := json.Unmarshal(m.Args, &hl); err != nil {
			p.kill()
			return nil, nil, fmt.Errorf("%s: bad description: %w", h.path, err)
		}
		if hl.Error != "" {
			p.kill()
			return nil, nil, &LoadError{Path: h.path, File: hl.File, Line: hl.Line, Type: hl.ErrorType,
				Message: hl.Error, Traceback: hl.Traceback}
		}
		return p, &hl, nil
	case <-p.done:
		return nil, nil, fmt.Errorf("%s: the plugin process ended before describing the plugin (%v)", h.path, p.exitErr)
	case <-timer.C:
		p.kill()
		return nil, nil, fmt.Errorf("%s: the plugin took more than %s to import", h.path, h.startTimeout)
	case <-ctx.Done():
		p.kill()
		return nil, nil, ctx.Err()
	}
}

// pluginEnv is the plugin process's environment: nekro's own secrets (API
// keys, tokens, database URLs) stay out; what a plugin needs to reach the
// network and find its packages goes in.
func pluginEnv(pkgDir string) []string {
	env := []string{"PYTHONPATH=" + pkgDir, "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "NEKRO_"):
		case k == "PATH", k == "HOME", k == "USER", k == "LANG", k == "TZ", strings.HasPrefix(k, "LC_"),
			strings.HasSuffix(strings.ToUpper(k), "_PROXY"), strings.HasPrefix(k, "SSL_CERT_"), k == "REQUESTS_CA_BUNDLE":
			env = append(env, kv)
		}
	}
	return env
}

// build turns the description into a plugin with raw methods and hooks.
func (h *host) build(hl *hello) (err error) {
	defer func() {
		if v := recover(); v != nil { // plugin.New panics on bad names
			err = fmt.Errorf("%s: %v", h.path, v)
		}
	}()
	m := hl.Plugin
	p := plugin.New(plugin.Meta{Name: m.Name, ModuleName: m.ModuleName, Author: m.Author, Version: m.Version,
		Description: m.Description, URL: m.URL})
	for _, md := range hl.Methods {
		t, ok := methodTypes[md.Type]
		if !ok {
			return fmt.Errorf("%s: method %s has unknown type %q", h.path, md.Name, md.Type)
		}
		var params []pluginhost.Param
		for _, pa := range md.Params {
			params = append(params, pluginhost.Param{Name: pa.Name, PyType: pa.PyType, Optional: pa.Optional, DefaultPy: pa.DefaultPy})
		}
		name := md.Name
		err := pluginhost.MountRaw(p, plugin.Method{Type: t, Name: md.Name, Description: md.Description, Doc: md.Doc},
			params, md.Result, func(ctx *plugin.Ctx, args map[string]json.RawMessage) (json.RawMessage, error) {
				return h.call(ctx, name, args)
			})
		if err != nil {
			return fmt.Errorf("%s: %w", h.path, err)
		}
	}
	for _, c := range hl.Commands {
		cmd := plugin.Command{Name: c.Name, Aliases: c.Aliases, Description: c.Description, Usage: c.Usage, Permission: c.Permission}
		err := pluginhost.MountCommand(p, cmd, c.Hidden, func(ctx *plugin.Ctx, call pluginhost.CommandCall) (string, error) {
			return h.command(ctx, cmd, call)
		})
		if err != nil {
			return fmt.Errorf("%s: %w", h.path, err)
		}
	}
	if hl.Router {
		p.MountRoutes(routeHandler{h}, "/") // public, as the reference's plugin routers are
	}
	if len(hl.Config) > 0 && string(hl.Config) != "null" {
		if _, err := pluginconfig.Fields(hl.Config); err != nil {
			return fmt.Errorf("%s: mount_config: %w", h.path, err)
		}
		pluginhost.MountConfigFields(p, hl.Config)
	}
	h.plugin, h.hooks = p, hl.Hooks
	p.OnInit(func(ctx context.Context) error { return h.init(ctx) })
	p.OnTimer(h.fireTimer) // recurring_timer's jobs (timers.go)
	p.OnCleanup(func(ctx context.Context) error {
		if !h.hooks.Cleanup {
			return nil
		}
		_, err := h.request(ctx, message{Op: "cleanup"}, "")
		return err
	})
	if hl.Hooks.PromptInject {
		p.OnPromptInject(func(ctx *plugin.Ctx) (string, error) {
			var text string
			err := h.turnHook(ctx, "prompt_inject", &text)
			return text, err
		})
	}
	for _, st := range []struct {
		on   bool
		op   string
		hook func(func(context.Context) error)
	}{{hl.Hooks.Enabled, "enabled", p.OnEnabled}, {hl.Hooks.Disabled, "disabled", p.OnDisabled}} {
		if st.on {
			op := st.op
			st.hook(func(ctx context.Context) error {
				_, err := h.request(ctx, message{Op: op}, "")
				return err
			})
		}
	}
	if hl.Hooks.UserMessage {
		p.OnUserMessage(h.messageHook("user_message"))
	}
	if hl.Hooks.SystemMessage {
		p.OnSystemMessage(h.messageHook("system_message"))
	}
	if hl.Hooks.CollectMethods {
		p.OnCollectMethods(func(ctx *plugin.Ctx) []string {
			var names []string
			if err := h.turnHook(ctx, "collect_methods", &names); err != nil {
				h.log.Warn("collect_methods failed: all the plugin's methods are shown", "chat", ctx.ChatKey(), "err", err)
				return methodNames(p)
			}
			return names
		})
	}
	if hl.Hooks.Reset {
		p.OnChannelReset(func(ctx context.Context, chatKey string) error {
			args, _ := json.Marshal(map[string]string{"chat_key": chatKey})
			_, err := h.request(ctx, message{Op: "reset", Args: args}, "")
			return err
		})
	}
	return nil
}

// messageHook asks the process's mount_on_user_message or
// mount_on_system_message hook (op) about a message.
func (h *host) messageHook(op string) func(ctx *plugin.Ctx, text string) plugin.Signal {
	return func(ctx *plugin.Ctx, text string) plugin.Signal {
		args, _ := json.Marshal(map[string]string{"chat_key": ctx.ChatKey(), "user_id": ctx.UserID(), "text": text})
		raw, err := h.request(ctx, message{Op: op, Args: args}, "")
		var s int
		if err == nil {
			err = json.Unmarshal(raw, &s)
		}
		if err != nil {
			h.log.Warn("message hook failed: the message goes on", "hook", op, "chat", ctx.ChatKey(), "err", err)
			return plugin.Continue
		}
		return plugin.Signal(s)
	}
}

// turnHookOps are the requests a late answer to only leaves out (the
// process is not restarted for them): per-turn hooks and chat commands.
var turnHookOps = map[string]bool{"prompt_inject": true, "collect_methods": true, "user_message": true, "system_message": true,
	"command": true}

// turnHook asks the process for a per-turn hook's answer about ctx's chat.
func (h *host) turnHook(ctx *plugin.Ctx, op string, out any) error {
	args, _ := json.Marshal(map[string]string{"chat_key": ctx.ChatKey(), "user_id": ctx.UserID()})
	// kb_tools' prompt lists the chat's knowledge documents: the hook may
	// read its chat's knowledge and memories.
	token := rand.Text()
	h.mu.Lock()
	h.readers[token] = ctx
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.readers, token)
		h.mu.Unlock()
	}()
	raw, err := h.request(ctx, message{Op: op, Args: args}, token)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

func methodNames(p *plugin.Plugin) []string {
	var out []string
	for _, m := range pluginhost.Methods(p) {
		out = append(out, m.Name)
	}
	return out
}

var methodTypes = map[string]plugin.MethodType{
	"tool": plugin.Tool, "agent": plugin.Agent, "behavior": plugin.Behavior, "multimodal_agent": plugin.MultimodalAgent,
}

// init tells the process its data directory, then runs the plugin's init
// hook; it runs at start and again after every restart.
func (h *host) init(ctx context.Context) error {
	dir, err := h.plugin.DataDir()
	if err != nil {
		return err
	}
	ready := map[string]any{"data_dir": dir, "memory": h.memoryOn}
	if raw, version := pluginhost.ConfigJSON(h.plugin); raw != nil {
		ready["config"], ready["config_version"] = raw, version
	}
	args, _ := json.Marshal(ready)
	if _, err := h.request(ctx, message{Op: "ready", Args: args}, ""); err != nil {
		return err
	}
	// The process's init also runs the plugin's on_enabled callbacks: the
	// reference runs them when it loads an enabled plugin, and init runs
	// only for an enabled one (registry.Init).
	if h.hooks.Init || h.hooks.Enabled {
		if _, err = h.request(ctx, message{Op: "init"}, ""); err != nil {
			return err
		}
	}
	h.mu.Lock()
	h.inited = true
	h.mu.Unlock()
	return nil
}

// call runs a sandbox method in the process. The call's ctx carries the
// method's deadline: a process that does not answer by then is killed
// (and restarted), so a hung plugin cannot hold its callers forever.
//
// A chat whose calls ended the process too often is refused for a while;
// a chat suspected of it runs its next call alone (blame.go).
func (h *host) call(ctx *plugin.Ctx, method string, args map[string]json.RawMessage) (json.RawMessage, error) {
	if next, err := h.admit(); err != nil {
		return nil, err
	} else if next != nil {
		return next.call(ctx, method, args)
	}
	defer h.leave()
	chat := ctx.ChatKey()
	if err := h.refusal(chat, time.Now()); err != nil {
		return nil, err
	}
	alone := h.isSuspect(chat)
	if err := h.gate.enter(ctx, alone); err != nil {
		return nil, fmt.Errorf("plugin %s: waiting for the process to run this call alone: %w", h.plugin.Key(), err)
	}
	defer h.gate.leave(alone)
	token := rand.Text()
	h.mu.Lock()
	h.calls[token] = ctx
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.calls, token)
		h.mu.Unlock()
	}()
	run, fsys := ctx.Run(), ctx.FS()
	c := callCtx{ChatKey: run.ChatKey, UserID: run.UserID, ContainerKey: run.ContainerKey, RunID: run.RunID,
		SharedPath: fsys.SharedPath(), UploadPath: fsys.UploadPath()}
	if raw, version := pluginhost.ConfigJSON(h.plugin); raw != nil {
		c.ConfigVersion = &version // the process fetches the settings when they changed
	}
	body, _ := json.Marshal(callBody{Method: method, Args: args, Ctx: c})
	raw, err := h.requestAs(ctx, message{Op: "call", Args: body}, token, chat)
	if alone && !errors.Is(err, errProcessEnded) {
		h.cleared(chat) // it ran alone and the process lived
	}
	return raw, err
}

// errProcessEnded marks the error of a call the process's death ended.
var errProcessEnded = errors.New("the plugin's process ended")

// processEnded is that error, with its message saying what it cost the
// call's chat.
type processEnded struct{ error }

func (e processEnded) Is(target error) bool { return target == errProcessEnded }
func (e processEnded) Unwrap() error        { return e.error }

// callBody is a call's request to the process.
type callBody struct {
	Method string                     `json:"method"`
	Args   map[string]json.RawMessage `json:"args"`
	Ctx    callCtx                    `json:"ctx"`
}

// callCtx is what the process builds the call's AgentCtx from.
type callCtx struct {
	ChatKey       string  `json:"chat_key"`
	UserID        string  `json:"user_id"`
	ContainerKey  string  `json:"container_key"`
	RunID         string  `json:"run_id"`
	SharedPath    string  `json:"shared_path"`
	UploadPath    string  `json:"upload_path"`
	ConfigVersion *uint64 `json:"config_version,omitempty"`
}

// request sends one request and waits for its answer, the process's end
// or ctx.
func (h *host) request(ctx context.Context, m message, token string) (json.RawMessage, error) {
	if next, err := h.admit(); err != nil {
		return nil, err
	} else if next != nil {
		return next.request(ctx, m, token)
	}
	defer h.leave()
	return h.requestAs(ctx, m, token, "")
}

// admit counts a call or hook request in (leave counts it out), or
// returns the host that took over from h (the reloaded plugin's), or an
// error when h's plugin was removed.
func (h *host) admit() (*host, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.retired {
		if h.next != nil {
			return h.next, nil
		}
		return nil, fmt.Errorf("plugin %s was removed", h.plugin.Key())
	}
	h.active++
	return nil, nil
}

func (h *host) leave() {
	h.mu.Lock()
	h.active--
	h.mu.Unlock()
}

// requestAs is request for a sandbox call of chat: the process's death
// during it is laid at chat's door (judge).
func (h *host) requestAs(ctx context.Context, m message, token, chat string) (json.RawMessage, error) {
	p, err := h.current(ctx)
	if err != nil {
		return nil, err
	}
	p.pmu.Lock()
	p.nextID++
	id := p.nextID
	ch := make(chan message, 1)
	p.pending[id] = ch
	if chat != "" {
		p.inflight[id] = chat
	}
	p.pmu.Unlock()
	defer func() {
		p.pmu.Lock()
		delete(p.pending, id)
		if chat != "" {
			select {
			case <-p.done: // judge has read it; keep it as it was
			default:
				delete(p.inflight, id)
			}
		}
		p.pmu.Unlock()
	}()
	m.ID, m.Call = &id, token
	if err := p.send(m); err != nil {
		return nil, fmt.Errorf("plugin %s: %w", h.plugin.Key(), err)
	}
	// A process that has not answered shortly before the deadline is
	// taken out of service then, not at the deadline: the caller (the
	// run's RPC server) answers the sandbox at the deadline, and the
	// sandbox's next call must find a fresh process, not this one dying.
	// A per-turn hook that is late is only left out of the turn: the
	// process, busy perhaps with a slow service, is not restarted for it.
	var outOfTime <-chan time.Time
	if dl, ok := ctx.Deadline(); ok && !turnHookOps[m.Op] {
		left := time.Until(dl)
		t := time.NewTimer(left - min(left/10, deadlineMargin))
		defer t.Stop()
		outOfTime = t.C
	}
	select {
	case <-outOfTime:
		h.log.Warn("python plugin did not answer in time: restarting its process", "op", m.Op, "chat", chat)
		if chat != "" {
			p.pmu.Lock()
			if p.culprit == "" {
				p.culprit = chat
			}
			p.pmu.Unlock()
		}
		h.restart(p)
		<-ctx.Done()
		return nil, fmt.Errorf("plugin %s did not answer within its deadline; its process is restarted", h.plugin.Key())
	case r := <-ch:
		if len(r.Error) > 0 {
			var ce callError
			if json.Unmarshal(r.Error, &ce) != nil {
				ce.Message = string(r.Error)
			}
			if ce.Type == "argument" {
				return nil, &plugin.ArgumentError{Method: methodName(m), Msg: strings.TrimPrefix(ce.Message, methodName(m)+"(): ")}
			}
			if ce.Traceback != "" {
				h.log.Debug("plugin call failed", "op", m.Op, "traceback", ce.Traceback)
			}
			return nil, errors.New(ce.Message)
		}
		return r.Result, nil
	case <-p.done:
		return nil, processEnded{h.deathError(p, chat)}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func methodName(m message) string {
	var a struct{ Method string }
	json.Unmarshal(m.Args, &a)
	return a.Method
}

// current returns the running process, waiting (within ctx) while it
// restarts.
func (h *host) current(ctx context.Context) (*process, error) {
	for {
		h.mu.Lock()
		p, ready, closed := h.proc, h.ready, h.closed
		h.mu.Unlock()
		if closed {
			return nil, fmt.Errorf("plugin %s is stopped", h.plugin.Key())
		}
		if p != nil {
			select {
			case <-p.done: // ended; supervise is about to restart it
				h.restart(p)
				continue
			default:
				return p, nil
			}
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, fmt.Errorf("plugin %s is restarting after its process ended: %w", h.plugin.Key(), ctx.Err())
		}
	}
}

// supervise restarts the process when it ends, with backoff, until close.
func (h *host) supervise(p *process) {
	for {
		<-p.done
		h.mu.Lock()
		if h.retired && !h.closed { // replaced or removed (live.go): no new process
			h.closed = true
			select {
			case <-h.ready:
			default:
				close(h.ready)
			}
		}
		if h.closed {
			h.mu.Unlock()
			return
		}
		if time.Since(p.started) > time.Minute {
			h.backoff = 0 // it ran well for a while
		}
		var wait time.Duration // calls ended it: their chats pay (judge), the others get a process at once
		if !p.verdict.attributed() {
			h.backoff = min(max(2*h.backoff, minBackoff), maxBackoff)
			wait = h.backoff
		}
		h.mu.Unlock()
		h.restart(p)
		h.log.Warn("python plugin process ended; restarting", "err", p.exitErr, "in", wait)
		time.Sleep(wait)
		np, _, err := h.start(context.Background())
		if err != nil {
			h.log.Error("python plugin could not restart", "err", err)
			p = &process{done: closedChan(), started: time.Now()}
			continue
		}
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			np.kill()
			return
		}
		h.proc = np
		close(h.ready)
		h.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), h.startTimeout)
		if err := h.init(ctx); err != nil {
			h.log.Error("python plugin init after restart failed", "err", err)
		}
		cancel()
		p = np
	}
}

// restart takes p out of service (calls wait for its successor) and
// kills it; supervise starts the successor.
func (h *host) restart(p *process) {
	h.mu.Lock()
	if h.proc == p && !h.closed {
		h.proc, h.ready = nil, make(chan struct{})
	}
	h.mu.Unlock()
	p.kill()
}

// close stops the process for good.
func (h *host) close() {
	h.mu.Lock()
	h.closed = true
	p := h.proc
	if h.ready != nil {
		select {
		case <-h.ready:
		default:
			close(h.ready)
		}
	}
	h.mu.Unlock()
	if p != nil {
		p.kill()
		<-p.done
	}
}

func (p *process) send(m message) error {
	b, ok := appendRequest(make([]byte, 0, 64+len(m.Args)+len(m.Call)), m)
	if !ok {
		var err error
		if b, err = json.Marshal(m); err != nil {
			return err
		}
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	_, err := p.conn.Write(append(b, '\n'))
	return err
}

// appendRequest appends nekro's request m as json.Marshal writes it,
// without encoding its args a second time (they are json.Marshal's
// output already, compact and valid): a Python call's request is
// written in one pass. false: m is not a request of that form (an
// answer, a log line, an op or token needing escapes).
func appendRequest(b []byte, m message) ([]byte, bool) {
	if m.ID == nil || m.Req != nil || m.Result != nil || m.Error != nil || m.Level != "" || m.Msg != "" ||
		!plainToken(m.Op) || !plainToken(m.Call) {
		return nil, false
	}
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, *m.ID, 10)
	if m.Op != "" {
		b = append(append(append(b, `,"op":"`...), m.Op...), '"')
	}
	if m.Call != "" {
		b = append(append(append(b, `,"call":"`...), m.Call...), '"')
	}
	if len(m.Args) > 0 {
		b = append(append(b, `,"args":`...), m.Args...)
	}
	return append(b, '}'), true
}

// plainToken reports whether s is written in JSON as it is (letters,
// digits, '_', '-', '.'): ops and call tokens are.
func plainToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// parseAnswer reads the usual answer to a request, {"id":N,"result":R}
// as the process writes it, without decoding R (the caller gets it
// raw); false for any other line, which json.Unmarshal reads.
func parseAnswer(line []byte, m *message) bool {
	const head, mid = `{"id":`, `,"result":`
	if !bytes.HasPrefix(line, []byte(head)) || len(line) < len(head)+len(mid)+2 || line[len(line)-1] != '}' {
		return false
	}
	rest := line[len(head):]
	n := 0
	for n < len(rest) && n < 19 && '0' <= rest[n] && rest[n] <= '9' {
		n++
	}
	if n == 0 || (n > 1 && rest[0] == '0') || !bytes.HasPrefix(rest[n:], []byte(mid)) {
		return false
	}
	id, err := strconv.ParseInt(string(rest[:n]), 10, 64)
	if err != nil {
		return false
	}
	result := rest[n+len(mid) : len(rest)-1]
	if !json.Valid(result) {
		return false
	}
	m.ID, m.Result = &id, append(json.RawMessage(nil), result...)
	return true
}

func (p *process) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// read dispatches what the process sends: its hello, answers to requests,
// its own requests (served concurrently) and log lines.
func (h *host) read(p *process) {
	sc := bufio.NewScanner(p.conn)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		var m message
		line := sc.Bytes()
		if !parseAnswer(line, &m) {
			if err := json.Unmarshal(line, &m); err != nil {
				h.log.Warn("python plugin sent a malformed line", "err", err)
				continue
			}
		}
		switch {
		case m.Op == "hello":
			m.Args = append(json.RawMessage(nil), line...)
			select {
			case p.hello <- m:
			default:
			}
		case m.Op == "log":
			h.logLine(m)
		case m.Req != nil:
			go p.answer(h, m)
		case m.ID != nil:
			p.pmu.Lock()
			ch, st := p.pending[*m.ID], p.streams[*m.ID]
			p.pmu.Unlock()
			if st != nil { // a web request's answer, in parts (web.go)
				st.deliver(m)
			} else if ch != nil {
				ch <- m
			}
		}
	}
	if err := sc.Err(); err != nil {
		h.log.Error("python plugin connection failed: stopping its process", "err", err)
	}
	p.kill()
}

func (h *host) logLine(m message) {
	level := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warning": slog.LevelWarn,
		"error": slog.LevelError, "critical": slog.LevelError}[m.Level]
	h.log.Log(context.Background(), level, m.Msg)
}

// answer serves one request of the plugin's and writes the answer.
func (p *process) answer(h *host, m message) {
	result, err := h.serve(m)
	reply := message{Req: m.Req}
	if err != nil {
		reply.Error, _ = json.Marshal(err.Error())
	} else {
		reply.Result, err = json.Marshal(result)
		if err != nil {
			reply.Error, _ = json.Marshal(err.Error())
		}
	}
	if reply.Result == nil && reply.Error == nil {
		reply.Result = json.RawMessage("null")
	}
	p.send(reply)
}

// logWriter sends a process's stdout and stderr to nekro's log.
type logWriter struct {
	log   *slog.Logger
	level slog.Level
}

func (w logWriter) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if line != "" {
			w.log.Log(context.Background(), w.level, line)
		}
	}
	return len(b), nil
}
