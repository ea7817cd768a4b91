package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/rpc"
	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/internal/sandbox/stub"
	"github.com/nekro-go/nekro/plugin"
)

// preparedRun is a sandbox started for a chat, with its run directory and
// RPC server, waiting for code. Nothing of the AI's has run in it.
type preparedRun struct {
	id, dir      string
	chatKey      string
	containerKey string
	limits       sandbox.Limits
	methods      []*plugin.MethodInfo
	srv          *rpc.Server
	proc         sandbox.Process
	discardOnce  sync.Once
}

// prepare starts a sandbox for chatKey, with its RPC server, ready for
// code. Backends that take descriptors (bubblewrap) get the stubs and the
// RPC control socket directly: nothing of the run exists on the host's
// disk. Others (Docker) get a run directory with the stubs and a socket
// owned by the chat's uid.
func (rt *Runtime) prepare(chatKey string, limits sandbox.Limits) (*preparedRun, error) {
	ctx := context.Background()
	containerKey := files.ContainerKey(chatKey)
	uid, gid, err := rt.chatUID(ctx, chatKey)
	if err != nil {
		return nil, err
	}
	uploads, err := rt.layout.EnsureUploadsDir(chatKey)
	if err != nil {
		return nil, err
	}
	shared, err := rt.layout.EnsureSharedDir(chatKey)
	if err != nil {
		return nil, err
	}
	pr := &preparedRun{id: newRunID(), chatKey: chatKey, containerKey: containerKey, limits: limits,
		methods: rt.registry.Methods()}
	apiCaller, err := stub.APICaller(pr.methods)
	if err != nil {
		return nil, err
	}
	runFiles := map[string][]byte{
		"boot.py":       stub.Boot(),
		"api_caller.py": apiCaller,
		"chat_key":      []byte(chatKey),
	}
	cfg := rpc.Config{
		Methods:     runMethods{rt: rt, allowed: pr.methods},
		CallTimeout: rt.cfg.CallTimeout,
		Log:         rt.log.With("run", pr.id, "chat", chatKey),
		DiskFullHint: fmt.Sprintf("a disk quota is full: each plugin's data directory holds at most %d MiB (--plugin-data-quota), "+
			"each chat's /app/shared and /app/uploads %d MiB and %d files each (--shared-quota, --shared-inodes)",
			rt.cfg.PluginDataQuota>>20, rt.cfg.SharedQuota>>20, rt.cfg.SharedInodes),
	}
	spec := sandbox.Spec{SharedDir: shared, UploadsDir: uploads, UID: uid, GID: gid, Limits: limits}
	if cp, ok := rt.runner.(sandbox.ConnPasser); ok && cp.PassesConn() {
		var conn *os.File
		if pr.srv, conn, err = rpc.ListenPassed(ctx, cfg); err != nil {
			return nil, err
		}
		spec.Conn, spec.Files = conn, runFiles
		pr.proc, err = rt.runner.Start(spec)
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
	if pr.proc, err = rt.runner.Start(spec); err != nil {
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
	pr.dir = filepath.Join(rt.runsDir, pr.id)
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
		if err := os.WriteFile(filepath.Join(pr.dir, name), content, 0o644); err != nil {
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
	})
}

// spareKey is what a warm spare must match to serve a run: the chat and
// the limits the sandbox was started with (the time limit is the host's
// and may differ).
func spareKey(chatKey string, l sandbox.Limits) string {
	l.Timeout = 0
	return fmt.Sprintf("%s\x00%+v", chatKey, l)
}

// spares keeps at most one started sandbox per recently active chat, so
// the next run in that chat skips sandbox start-up. A spare is started
// only when the pool has room (spares never evict each other: with more
// active chats than room, evicting would start sandboxes that are thrown
// away unused and slow every run down); it is discarded when idle too
// long, when its chat is reset, and on Close.
type spares struct {
	mu       sync.Mutex
	byKey    map[string]*spare
	starting map[string]bool // reserved, not yet put; false once dropChat cancelled it
	max      int
	idle     time.Duration
	closed   bool
}

// reserve reports whether a spare for key may be started now, and if so
// holds a place for it until put.
func (s *spares) reserve(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, busy := s.starting[key]; s.closed || busy || len(s.byKey)+len(s.starting) >= s.max {
		return false
	}
	if _, ok := s.byKey[key]; ok {
		return false // one is already waiting
	}
	s.starting[key] = true
	return true
}

// unreserve gives back a place reserve held, when the start failed.
func (s *spares) unreserve(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.starting, key)
}

type spare struct {
	run   *preparedRun
	timer *time.Timer
}

func (s *spares) take(key string) *preparedRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	sp, ok := s.byKey[key]
	if !ok {
		return nil
	}
	delete(s.byKey, key)
	sp.timer.Stop()
	return sp.run
}

func (s *spares) put(key string, pr *preparedRun) {
	s.mu.Lock()
	live := s.starting[key]
	delete(s.starting, key)
	if _, dup := s.byKey[key]; s.closed || dup || !live {
		s.mu.Unlock()
		pr.discard()
		return
	}
	sp := &spare{run: pr}
	s.byKey[key] = sp
	sp.timer = time.AfterFunc(s.idle, func() {
		s.mu.Lock()
		mine := s.byKey[key] == sp
		if mine {
			delete(s.byKey, key)
		}
		s.mu.Unlock()
		if mine {
			pr.discard()
		}
	})
	s.mu.Unlock()
}

// dropChat discards the spares of chatKey, also those still starting.
func (s *spares) dropChat(chatKey string) {
	s.mu.Lock()
	for k := range s.starting {
		if strings.HasPrefix(k, chatKey+"\x00") {
			s.starting[k] = false
		}
	}
	var drop []*preparedRun
	for k, sp := range s.byKey {
		if sp.run.chatKey == chatKey {
			sp.timer.Stop()
			drop = append(drop, sp.run)
			delete(s.byKey, k)
		}
	}
	s.mu.Unlock()
	for _, d := range drop {
		d.discard()
	}
}

func (s *spares) close() {
	s.mu.Lock()
	s.closed = true
	var drop []*preparedRun
	for k, sp := range s.byKey {
		sp.timer.Stop()
		drop = append(drop, sp.run)
		delete(s.byKey, k)
	}
	s.mu.Unlock()
	for _, d := range drop {
		d.discard()
	}
}
