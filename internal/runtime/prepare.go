package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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

// prepare creates the run directory (stubs, socket) and starts the sandbox.
func (rt *Runtime) prepare(chatKey string, limits sandbox.Limits) (*preparedRun, error) {
	containerKey := files.ContainerKey(chatKey)
	uploads, shared, err := rt.ensureChatDirs(chatKey, containerKey)
	if err != nil {
		return nil, err
	}
	pr := &preparedRun{id: newRunID(), chatKey: chatKey, containerKey: containerKey, limits: limits,
		methods: rt.registry.Methods()}
	pr.dir = filepath.Join(rt.runsDir, pr.id)
	if err := os.Mkdir(pr.dir, 0o755); err != nil {
		return nil, fmt.Errorf("run dir: %w", err)
	}
	apiCaller, err := stub.APICaller(pr.methods)
	if err != nil {
		os.RemoveAll(pr.dir)
		return nil, err
	}
	for name, content := range map[string][]byte{
		"boot.py":       stub.Boot(),
		"api_caller.py": apiCaller,
		"chat_key":      []byte(chatKey),
	} {
		if err := os.WriteFile(filepath.Join(pr.dir, name), content, 0o644); err != nil {
			os.RemoveAll(pr.dir)
			return nil, fmt.Errorf("write %s: %w", name, err)
		}
	}
	pr.srv, err = rpc.Listen(context.Background(), filepath.Join(pr.dir, "rpc.sock"), rpc.Config{
		Methods:     runMethods{rt: rt, allowed: pr.methods},
		CallTimeout: rt.cfg.CallTimeout,
		Log:         rt.log.With("run", pr.id, "chat", chatKey),
	})
	if err != nil {
		os.RemoveAll(pr.dir)
		return nil, err
	}
	pr.proc, err = rt.runner.Start(sandbox.Spec{RunDir: pr.dir, SharedDir: shared, UploadsDir: uploads, Limits: limits})
	if err != nil {
		pr.srv.Close()
		os.RemoveAll(pr.dir)
		return nil, err
	}
	return pr, nil
}

// discard ends the sandbox and removes the run directory.
func (pr *preparedRun) discard() {
	pr.discardOnce.Do(func() {
		pr.proc.Kill()
		pr.srv.Close()
		os.RemoveAll(pr.dir)
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
// the next run in that chat skips sandbox start-up. A spare is discarded
// when idle too long, when the pool is full (oldest first), when its chat
// is reset, and on Close.
type spares struct {
	mu     sync.Mutex
	byKey  map[string]*spare
	max    int
	idle   time.Duration
	closed bool
}

type spare struct {
	run   *preparedRun
	born  time.Time
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
	if s.closed {
		s.mu.Unlock()
		pr.discard()
		return
	}
	var drop []*preparedRun
	if old, ok := s.byKey[key]; ok {
		old.timer.Stop()
		drop = append(drop, old.run)
		delete(s.byKey, key)
	}
	for len(s.byKey) >= s.max {
		oldestKey := ""
		for k, sp := range s.byKey {
			if oldestKey == "" || sp.born.Before(s.byKey[oldestKey].born) {
				oldestKey = k
			}
		}
		s.byKey[oldestKey].timer.Stop()
		drop = append(drop, s.byKey[oldestKey].run)
		delete(s.byKey, oldestKey)
	}
	sp := &spare{run: pr, born: time.Now()}
	sp.timer = time.AfterFunc(s.idle, func() {
		s.mu.Lock()
		if s.byKey[key] == sp {
			delete(s.byKey, key)
		} else {
			sp = nil
		}
		s.mu.Unlock()
		if sp != nil {
			sp.run.discard()
		}
	})
	s.byKey[key] = sp
	s.mu.Unlock()
	for _, d := range drop {
		d.discard()
	}
}

// dropChat discards the spares of chatKey.
func (s *spares) dropChat(chatKey string) {
	s.mu.Lock()
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
