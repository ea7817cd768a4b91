package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/rpc"
	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/internal/sandbox/stub"
)

// preparedRun is a sandbox started for a chat, with its run directory and
// RPC server, waiting for code. Nothing of the AI's has run in it.
//
// sandbox names the sandbox from its start (its run directory, logs);
// id is the run's id, given when code is released into it (release), so
// a run in a warm spare made minutes earlier is named by its own time.
type preparedRun struct {
	sandbox, dir string
	id           string
	chatKey      string
	containerKey string
	limits       sandbox.Limits
	methods      []*pluginhost.MethodInfo
	plugins      atomic.Pointer[Plugins] // the run's ExecRequest.Plugins, set before its code is released
	srv          *rpc.Server
	proc         sandbox.Process
	discardOnce  sync.Once
	unhold       func() // lets the chat's volumes go idle (provisioner.hold)
}

// prepare starts a sandbox for chatKey, with its RPC server, ready for
// code. Backends that take descriptors (bubblewrap) get the stubs and the
// RPC control socket directly: nothing of the run exists on the host's
// disk. Others (Docker) get a run directory with the stubs and a socket
// owned by the chat's uid.
// ctx bounds the start; the run's RPC server lives until the run ends.
// ahead marks a warm spare's start (sandbox.Spec.Ahead).
//
// The chat's volumes stay mounted from here until the sandbox is
// discarded: its directories are in use (provisioner.hold).
func (rt *Runtime) prepare(ctx context.Context, chatKey string, limits sandbox.Limits, methods []*pluginhost.MethodInfo, ahead bool) (_ *preparedRun, err error) {
	rt.provision.hold(chatKey)
	defer func() {
		if err != nil {
			rt.provision.unhold(chatKey)
		}
	}()
	containerKey := files.ContainerKey(chatKey)
	uid, gid, err := rt.chatUID(ctx, chatKey)
	if err != nil {
		return nil, err
	}
	// One volume holds both directories (provisioner.ProvideChatDir).
	uploads, err := rt.layout.EnsureUploadsDir(chatKey)
	if err != nil {
		return nil, err
	}
	shared, err := rt.layout.EnsureSharedDir(chatKey)
	if err != nil {
		return nil, err
	}
	if err := rt.trustPackageLayer(chatKey, shared); err != nil {
		return nil, err
	}
	pr := &preparedRun{sandbox: newSandboxID(), chatKey: chatKey, containerKey: containerKey, limits: limits,
		methods: methods, unhold: func() { rt.provision.unhold(chatKey) }}
	apiCaller, err := rt.apiCaller(pr.methods)
	if err != nil {
		return nil, err
	}
	runFiles := map[string][]byte{
		"boot.py":       stub.Boot(),
		"api_caller.py": apiCaller,
		"chat_key":      []byte(chatKey),
	}
	for name, b := range stub.PipShim() {
		runFiles[name] = b
	}
	cfg := rpc.Config{
		Methods:     runMethods{rt: rt, pr: pr},
		CallTimeout: rt.cfg.CallTimeout,
		Log:         rt.log.With("sandbox", pr.sandbox, "chat", chatKey),
		DiskFullHint: fmt.Sprintf("a disk quota is full: each plugin's data directory holds at most %d MiB (--plugin-data-quota), "+
			"each chat's /app/shared and /app/uploads %d MiB and %d files together (--shared-quota, --shared-inodes)",
			rt.cfg.PluginDataQuota>>20, rt.cfg.SharedQuota>>20, rt.cfg.SharedInodes),
	}
	spec := sandbox.Spec{SharedDir: shared, UploadsDir: uploads, UID: uid, GID: gid, Limits: limits, Ahead: ahead}
	if cp, ok := rt.runner.(sandbox.ConnPasser); ok && cp.PassesConn() {
		var conn *os.File
		if pr.srv, conn, err = rpc.ListenPassed(context.Background(), cfg); err != nil {
			return nil, err
		}
		spec.Conn, spec.Files = conn, runFiles
		pr.proc, err = rt.runner.Start(ctx, spec)
		conn.Close() // the sandbox holds it now
		if err != nil {
			pr.srv.Close()
			return nil, err
		}
		return pr, nil
	}
	if err := rt.prepareRunDir(pr, runFiles, cfg, uid, gid); err != nil {
		return nil, err
	}
	spec.RunDir = pr.dir
	if pr.proc, err = rt.runner.Start(ctx, spec); err != nil {
		pr.srv.Close()
		os.RemoveAll(pr.dir)
		return nil, err
	}
	return pr, nil
}

// prepareRunDir writes the run's files into a directory of its own and
// listens on its socket there, both given to the chat's uid (mode 0700 and
// 0600): other host users and other chats cannot connect to it.
func (rt *Runtime) prepareRunDir(pr *preparedRun, runFiles map[string][]byte, cfg rpc.Config, uid, gid int) error {
	pr.dir = filepath.Join(rt.runsDir, pr.sandbox)
	if err := os.Mkdir(pr.dir, 0o700); err != nil {
		return fmt.Errorf("run dir: %w", err)
	}
	fail := func(err error) error {
		if pr.srv != nil {
			pr.srv.Close()
		}
		os.RemoveAll(pr.dir)
		return err
	}
	for name, content := range runFiles {
		mode := os.FileMode(0o644)
		if strings.HasPrefix(name, "bin/") { // nekro's pip command
			mode = 0o755
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(pr.dir, name)), 0o755); err != nil {
			return fail(fmt.Errorf("write %s: %w", name, err))
		}
		if err := os.WriteFile(filepath.Join(pr.dir, name), content, mode); err != nil {
			return fail(fmt.Errorf("write %s: %w", name, err))
		}
	}
	var err error
	if pr.srv, err = rpc.Listen(context.Background(), filepath.Join(pr.dir, "rpc.sock"), cfg); err != nil {
		return fail(err)
	}
	if uid >= 0 {
		if err := pr.srv.Chown(uid, gid); err != nil {
			return fail(fmt.Errorf("%w (the chat's uid %d must own its run's socket: run nekro as root, or use the bwrap backend as your own user)", err, uid))
		}
		if err := os.Chown(pr.dir, uid, gid); err != nil {
			return fail(fmt.Errorf("run dir: %w", err))
		}
	} else if err := os.Chmod(pr.dir, 0o755); err != nil {
		return fail(fmt.Errorf("run dir: %w", err))
	}
	return nil
}

// discard ends the sandbox and removes the run directory, if any.
func (pr *preparedRun) discard() {
	pr.discardOnce.Do(func() {
		pr.proc.Kill()
		pr.srv.Close()
		if pr.dir != "" {
			os.RemoveAll(pr.dir)
		}
		if pr.unhold != nil {
			pr.unhold()
		}
	})
}

// apiCaller returns the stub module for a set of methods, generated once
// per set: it depends on nothing else, and rendering it (signatures,
// docstrings) costs about 0.2 ms, which every run would pay.
func (rt *Runtime) apiCaller(methods []*pluginhost.MethodInfo) ([]byte, error) {
	var key strings.Builder
	for _, m := range methods {
		fmt.Fprintf(&key, "%p,", m)
	}
	if src, ok := rt.stubs.Load(key.String()); ok {
		return src.([]byte), nil
	}
	src, err := stub.APICaller(methods)
	if err != nil {
		return nil, err
	}
	rt.stubs.Store(key.String(), src)
	return src, nil
}
