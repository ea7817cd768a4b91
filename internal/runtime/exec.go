package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/keys"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/rpc"
	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/plugin"
)

// ExecRequest is one run of code in a chat's sandbox.
type ExecRequest struct {
	ChatKey string
	UserID  string // may be empty (e.g. a timer); user-scoped calls then fail clearly
	Code    string
	// Limits override the runtime's for this run (zero fields keep them).
	Limits sandbox.Limits
	// OnResult is called after each successful method call, in order.
	OnResult func(m *pluginhost.MethodInfo, result json.RawMessage)
	// Chat receives what plugins send to the chat (ctx.SendText and
	// friends); nil leaves the run without one. The host screens its
	// system messages with the plugins' hooks (host.Exec).
	Chat pluginhost.ChatSender
	// Model answers the run's plugins' Ctx.AskModel; nil: unavailable.
	Model func(ctx context.Context, group string, parts []plugin.ContentPart) (string, error)
	// History answers the run's plugins' Ctx.History (this chat's); nil:
	// unavailable.
	History func(ctx context.Context, limit int) ([]string, error)
	// Methods are the methods the run's code may call (its stubs, and
	// the only ones its calls reach), given by the host: the chat's view
	// (host.ChatMethods) or every enabled plugin's (host.Exec). Nil: the
	// run's code calls none.
	Methods []*pluginhost.MethodInfo
	// Plugins, when set, is asked at each call what the plugins are now
	// (the host's registry): a method answers only while its plugin stays
	// enabled, and one a dynamic plugin replaced since the run started
	// still answers as the run's own. Nil: Methods answer as given.
	Plugins Plugins
	// Prewarmed says the caller called Prewarm for this run (with the
	// same limits and methods), and will again before any next run: no
	// spare is started after it unless its chat is active (runs in a
	// row: activeAfter).
	Prewarmed bool
	// Since is when the work this run serves began: for a turn, when its
	// oldest message arrived. Runs waiting for a slot (and the warm
	// sandbox starts Prewarm is given it for) are served oldest first,
	// so a burst of younger work does not pass it. Zero: now.
	Since time.Time
}

// Plugins is what a run's calls are checked against while it runs: the
// enabled plugins now (*registry.Registry).
type Plugins interface {
	// Method returns the enabled method with the given Python name.
	Method(name string) (*pluginhost.MethodInfo, error)
	// Plugin returns the enabled plugin with the given key.
	Plugin(key string) (*plugin.Plugin, error)
}

// ExecResult is what a run produced. Its JSON form is what `nekro exec
// --json` prints.
type ExecResult struct {
	RunID      string           `json:"run_id"`
	ChatKey    string           `json:"chat_key"`
	StopType   sandbox.StopType `json:"stop_type"`
	ExitCode   int              `json:"exit_code"`
	Output     string           `json:"output"`
	DurationMS int64            `json:"duration_ms"`
	Calls      []rpc.Call       `json:"calls"`
	// CallsNotRecorded counts calls beyond the first rpc.MaxCallRecords.
	CallsNotRecorded int `json:"calls_not_recorded,omitempty"`
	// Note explains the stop type when the output alone would not.
	Note string `json:"note,omitempty"`
	// AgentResult is the result of the AGENT or MULTIMODAL_AGENT call that
	// ended the run: a JSON string or a list of content parts.
	AgentMethod string          `json:"agent_method,omitempty"`
	AgentResult json.RawMessage `json:"agent_result,omitempty"`

	Duration time.Duration `json:"-"`
}

func (rt *Runtime) limits(override sandbox.Limits) sandbox.Limits {
	l := rt.cfg.Limits
	if override.Timeout > 0 {
		l.Timeout = override.Timeout
	}
	if override.OutputBytes > 0 {
		l.OutputBytes = override.OutputBytes
	}
	if override.MemoryBytes > 0 {
		l.MemoryBytes = override.MemoryBytes
	}
	if override.Network {
		l.Network = true
	}
	return l
}

// Exec runs code in the chat's sandbox with req.Methods callable, and
// waits for it to end. An error means the run could not happen; what the
// code did (even crashing) is in the result.
func (rt *Runtime) Exec(ctx context.Context, req ExecRequest) (*ExecResult, error) {
	if err := keys.Scope("chat", req.ChatKey); err != nil {
		return nil, err
	}
	if req.UserID != "" {
		if err := keys.Scope("user", req.UserID); err != nil {
			return nil, err
		}
	}
	limits := rt.limits(req.Limits)
	methods := req.Methods
	if rt.janitor != nil {
		dir := filepath.Base(rt.layout.SharedDir(files.ContainerKey(req.ChatKey)))
		rt.janitor.begin(dir, req.ChatKey)
		defer rt.janitor.end(dir)
	}
	// The chat's warm sandbox is taken before a run slot: one still
	// starting (a prewarmed new chat's, waiting for a start slot) is
	// waited for without holding a slot that a ready run could use. A
	// started sandbox takes no more memory in the caller's hands than in
	// the pool.
	var pr *preparedRun
	if rt.spares != nil {
		pr = rt.spares.take(ctx, spareKey(req.ChatKey, limits, methods))
	}
	warm := pr != nil
	defer func() {
		if pr != nil {
			pr.discard()
		}
	}()
	if err := rt.runSlots.acquire(ctx, req.Since); err != nil {
		return nil, fmt.Errorf("waiting for a free sandbox slot: %w", err)
	}
	defer rt.runSlots.release()
	if rt.spares != nil && (rt.spares.ran(req.ChatKey, time.Now()) || !req.Prewarmed) {
		// The next run in this chat finds a sandbox already started,
		// started spareDelay after this one's result is returned; a run
		// its caller prewarmed starts one only when its chat is active
		// (spares.ran).
		defer rt.bg.Go(func() {
			time.Sleep(spareDelay)
			rt.spawnSpare(req.ChatKey, limits, methods)
		})
	}
	for {
		if pr == nil {
			rt.coldRuns.Add(1)
			var err error
			if pr, err = rt.prepare(ctx, req.ChatKey, limits, methods, false); err != nil {
				return nil, err
			}
		}
		err := rt.release(ctx, pr, req)
		if err == nil {
			break
		}
		pr.discard()
		pr = nil
		if !warm {
			return nil, err
		}
		// The spare died while waiting (killed, out of memory): start afresh.
		rt.log.Warn("warm sandbox unusable, starting a new one", "chat", req.ChatKey, "err", err)
		warm = false
	}
	// An AGENT call ends the run: the calling process exits at once, and
	// any other process of the run (a forked child, a thread's parent) is
	// stopped shortly after, so no code keeps running past it.
	var endTimer *time.Timer
	var endMu sync.Mutex
	pr.srv.OnEnd(func() {
		endMu.Lock()
		defer endMu.Unlock()
		endTimer = time.AfterFunc(agentGrace, pr.proc.Kill)
	})
	outcome, err := pr.proc.Wait(ctx, limits.Timeout)
	endMu.Lock()
	if endTimer != nil {
		endTimer.Stop()
	}
	endMu.Unlock()
	srv := pr.srv
	srv.Close()
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", pr.id, err)
	}
	runID := pr.id
	res := &ExecResult{
		RunID: runID, ChatKey: req.ChatKey, ExitCode: outcome.ExitCode, Output: outcome.Output,
		Duration: outcome.Duration, DurationMS: outcome.Duration.Milliseconds(), Calls: srv.Calls(),
		CallsNotRecorded: srv.Dropped(),
	}
	if res.Calls == nil {
		res.Calls = []rpc.Call{}
	}
	var endType plugin.MethodType
	if e := srv.Ending(); e != nil {
		endType = e.Type
		res.AgentMethod, res.AgentResult = e.Method, e.Result
	}
	res.StopType, res.Note = DecideStop(outcome, endType)
	if !rt.provision.volumes() { // a volume bounds /app/shared while the code writes
		if note := rt.enforceSharedQuota(pr); note != "" {
			res.Note = strings.TrimPrefix(res.Note+"; "+note, "; ")
		}
	}
	rt.observe(res, methods)
	rt.log.Debug("run finished", "run", runID, "chat", req.ChatKey, "stop", res.StopType, "exit", res.ExitCode,
		"duration", outcome.Duration, "calls", len(res.Calls), "warm", warm)
	return res, nil
}

// enforceSharedQuota empties the sandbox's shared directory when a run
// left more than Config.SharedQuota there, and says so. The walk does not
// follow symlinks the sandbox planted; removal neither.
func (rt *Runtime) enforceSharedQuota(pr *preparedRun) string {
	dir := rt.layout.SharedDir(pr.containerKey)
	var total int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	if total <= rt.cfg.SharedQuota {
		return ""
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() == sandbox.PackagesDirName && e.IsDir() {
			// Emptied, not removed: the chat's zygote and warm sandboxes
			// have this directory mounted (read-only) and keep seeing it.
			layer := filepath.Join(dir, e.Name())
			inner, _ := os.ReadDir(layer)
			for _, f := range inner {
				os.RemoveAll(filepath.Join(layer, f.Name()))
			}
			continue
		}
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
	rt.log.Warn("sandbox over its shared quota: emptied", "chat", pr.chatKey, "bytes", total, "quota", rt.cfg.SharedQuota)
	return fmt.Sprintf("/app/shared held %d MiB, over the %d MiB quota, and was emptied", total>>20, rt.cfg.SharedQuota>>20)
}

// spareDelay is how long after a run's result the chat's next sandbox is
// started: long enough for the caller to hand the result on (an HTTP
// answer takes well under a millisecond) before a zygote forks its next
// spare, 10-40 ms of CPU on a 2-core VM (see bwrap's reapDelay, measured
// with it).
const spareDelay = 5 * time.Millisecond

// agentGrace is how long the rest of a run may take to end after an AGENT
// call: time for the caller to print the result and exit by itself.
const agentGrace = 100 * time.Millisecond

// release names the run (its id carries the time it starts, not the
// time its sandbox was made), binds the run's identity to its RPC server
// and hands the sandbox the code.
func (rt *Runtime) release(ctx context.Context, pr *preparedRun, req ExecRequest) error {
	pr.id = newRunID()
	env := &pluginhost.RunEnv{RunInfo: plugin.RunInfo{
		RunID: pr.id, ChatKey: req.ChatKey, UserID: req.UserID, ContainerKey: pr.containerKey,
	}}
	env.StoreFor = rt.cfg.StoreFor
	env.Chat = req.Chat
	env.Model = req.Model
	env.History = req.History
	env.Knowledge = rt.KnowledgeFor(req.ChatKey)
	fsys, err := files.NewFS(rt.layout, env.RunInfo, rt.cfg.Files)
	if err != nil {
		return err
	}
	env.FS = fsys
	pr.plugins.Store(&req.Plugins)
	pr.srv.Bind(env, req.OnResult)
	if err := pr.proc.Release(ctx, []byte(req.Code)); err != nil {
		return fmt.Errorf("run %s: %w", pr.id, err)
	}
	return nil
}

// KnowledgeFor returns the knowledge base search (Config.Knowledge) bound
// to one chat, for a RunEnv of that chat (a run's, a hook's, a task's, an
// MCP call's); nil when there is none.
func (rt *Runtime) KnowledgeFor(chatKey string) func(ctx context.Context, query string, topK int) ([]plugin.KnowledgePassage, error) {
	if rt == nil || rt.cfg.Knowledge == nil {
		return nil
	}
	search := rt.cfg.Knowledge
	return func(ctx context.Context, query string, topK int) ([]plugin.KnowledgePassage, error) {
		return search(ctx, chatKey, query, topK)
	}
}

// runMethods limits a run to the methods it was given at start, and,
// when its request named the plugins (ExecRequest.Plugins), only while
// their plugin stays enabled: a dynamic plugin replaced since the run
// started (host.ReplacePlugin) still answers with the run's own method.
type runMethods struct {
	rt *Runtime
	pr *preparedRun
}

func (r runMethods) Method(name string) (*pluginhost.MethodInfo, error) {
	if name == sandbox.PipMethod { // the run's pip (see pip.go)
		return r.rt.pip, nil
	}
	var plugins Plugins
	if p := r.pr.plugins.Load(); p != nil {
		plugins = *p
	}
	if plugins == nil {
		for _, a := range r.pr.methods {
			if a.Name == name {
				return a, nil
			}
		}
		return nil, fmt.Errorf("method %q is not enabled for this run", name)
	}
	m, err := plugins.Method(name)
	for _, a := range r.pr.methods {
		if a.Name != name {
			continue
		}
		if a == m {
			return m, nil
		}
		if m != nil && m.Plugin().Key() != a.Plugin().Key() {
			break
		}
		// Replaced or removed since the run started: the run's own
		// method, while its plugin stays enabled.
		if _, perr := plugins.Plugin(a.Plugin().Key()); perr == nil {
			return a, nil
		}
		break
	}
	if err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("method %q is not enabled for this run", name)
}

// newRunID names a run: the UTC second it starts, then 64 random bits
// that keep ids unique.
func newRunID() string {
	var b [8]byte
	rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}

// newSandboxID names a sandbox while it waits for a run (its run
// directory, its logs): random, no time, since its run may come later.
func newSandboxID() string {
	var b [8]byte
	rand.Read(b[:])
	return "sb-" + hex.EncodeToString(b[:])
}

// ImportUpload copies the host file src into the chat's uploads, where the
// sandbox sees it read-only at /app/uploads/<name> (the name sanitized, the
// write atomic). It returns the sandbox path.
func (rt *Runtime) ImportUpload(ctx context.Context, chatKey, src string) (string, error) {
	return files.ImportUpload(ctx, rt.layout, chatKey, src)
}
