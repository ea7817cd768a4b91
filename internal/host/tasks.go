package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/keys"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/plugin"
)

// Task states.
const (
	TaskRunning   = "running"
	TaskDone      = "done"
	TaskFailed    = "failed"
	TaskCancelled = "cancelled"
)

// maxFinishedTasks bounds how many ended tasks the host remembers for
// the task list (the oldest are forgotten first).
const maxFinishedTasks = 200

// TaskInfo is a background task as GET /api/tasks shows it.
type TaskInfo struct {
	Plugin   string    `json:"plugin"`
	ChatKey  string    `json:"chat_key"`
	ID       string    `json:"id"`
	Status   string    `json:"status"`
	Progress int       `json:"progress"`
	Message  string    `json:"message"`
	Error    string    `json:"error,omitempty"`
	Started  time.Time `json:"started"`
	Ended    time.Time `json:"ended,omitzero"`
}

// task is one background task of a plugin.
type task struct {
	h      *Host
	p      *plugin.Plugin
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	info  TaskInfo
	waits map[string]chan string
}

// tasks keeps the host's background tasks.
type tasks struct {
	mu   sync.Mutex
	byID map[string]*task // plugin \x00 chat \x00 id
	base context.Context  // cancelled at Close
	stop context.CancelFunc
	wg   sync.WaitGroup
}

func taskKey(pluginKey, chatKey, id string) string { return pluginKey + "\x00" + chatKey + "\x00" + id }

func (h *Host) taskList() *tasks {
	h.tasksOnce.Do(func() {
		base, stop := context.WithCancel(context.Background())
		h.bgTasks = &tasks{byID: map[string]*task{}, base: base, stop: stop}
	})
	return h.bgTasks
}

// startTask runs fn for p in chatKey as task id.
func (h *Host) startTask(p *plugin.Plugin, chatKey, id string, fn func(ctx *plugin.Ctx) error) error {
	if err := keys.Scope("chat", chatKey); err != nil {
		return err
	}
	if id == "" || len(id) > 128 {
		return errors.New("a task id is 1 to 128 bytes")
	}
	ts := h.taskList()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.base.Err() != nil {
		return errors.New("nekro is shutting down: no new tasks")
	}
	k := taskKey(p.Key(), chatKey, id)
	if old, ok := ts.byID[k]; ok {
		old.mu.Lock()
		running := old.info.Status == TaskRunning
		old.mu.Unlock()
		if running {
			return fmt.Errorf("task %s is already running in chat %s", id, chatKey)
		}
	}
	ctx, cancel := context.WithCancel(ts.base)
	t := &task{h: h, p: p, cancel: cancel, done: make(chan struct{}), waits: map[string]chan string{},
		info: TaskInfo{Plugin: p.Key(), ChatKey: chatKey, ID: id, Status: TaskRunning, Started: time.Now().UTC()}}
	ts.byID[k] = t
	ts.prune()
	env := &pluginhost.RunEnv{RunInfo: plugin.RunInfo{ChatKey: chatKey, ContainerKey: files.ContainerKey(chatKey)},
		StoreFor: h.storeFor, Chat: screenedSender{ChatSender: taskSender{h: h, chatKey: chatKey}, h: h, chatKey: chatKey},
		Task: t, Knowledge: h.rt.KnowledgeFor(chatKey)}
	pctx := pluginhost.NewCtx(ctx, p, env)
	ts.wg.Add(1)
	go func() {
		defer ts.wg.Done()
		defer close(t.done)
		err := runTask(func() error { return fn(pctx) })
		t.mu.Lock()
		t.info.Ended = time.Now().UTC()
		switch {
		case ctx.Err() != nil:
			t.info.Status = TaskCancelled
		case err != nil:
			t.info.Status, t.info.Error = TaskFailed, err.Error()
		default:
			t.info.Status = TaskDone
		}
		t.mu.Unlock()
		cancel()
		if err != nil && ctx.Err() == nil {
			h.log.Warn("background task failed", "plugin", p.Key(), "chat", chatKey, "task", id, "err", err)
		}
	}()
	return nil
}

// runTask runs f, turning a panic into an error.
func runTask(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return f()
}

// prune forgets the oldest ended tasks past maxFinishedTasks; ts.mu held.
func (ts *tasks) prune() {
	type ended struct {
		key string
		at  time.Time
	}
	var done []ended
	for k, t := range ts.byID {
		t.mu.Lock()
		if t.info.Status != TaskRunning {
			done = append(done, ended{k, t.info.Ended})
		}
		t.mu.Unlock()
	}
	if len(done) <= maxFinishedTasks {
		return
	}
	sort.Slice(done, func(i, j int) bool { return done[i].at.Before(done[j].at) })
	for _, e := range done[:len(done)-maxFinishedTasks] {
		delete(ts.byID, e.key)
	}
}

func (t *task) Progress(percent int, message string) {
	t.mu.Lock()
	t.info.Progress, t.info.Message = min(max(percent, 0), 100), message
	t.mu.Unlock()
}

func (t *task) Wait(ctx context.Context, key string, timeout time.Duration) (string, error) {
	ch := make(chan string, 1)
	t.mu.Lock()
	if _, busy := t.waits[key]; busy {
		t.mu.Unlock()
		return "", fmt.Errorf("the task already waits on %q", key)
	}
	t.waits[key] = ch
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.waits, key)
		t.mu.Unlock()
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case data := <-ch:
		return data, nil
	case <-timer.C:
		return "", fmt.Errorf("no notification on %q within %s", key, timeout)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// notify hands data to the task waiting on key.
func (t *task) notify(key, data string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	ch, ok := t.waits[key]
	if !ok {
		return false
	}
	select {
	case ch <- data:
		return true
	default:
		return false
	}
}

func (h *Host) findTask(pluginKey, chatKey, id string) *task {
	ts := h.taskList()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.byID[taskKey(pluginKey, chatKey, id)]
}

// Tasks lists the background tasks, running first, then newest first.
func (h *Host) Tasks() []TaskInfo {
	ts := h.taskList()
	ts.mu.Lock()
	out := make([]TaskInfo, 0, len(ts.byID))
	for _, t := range ts.byID {
		t.mu.Lock()
		out = append(out, t.info)
		t.mu.Unlock()
	}
	ts.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if (out[i].Status == TaskRunning) != (out[j].Status == TaskRunning) {
			return out[i].Status == TaskRunning
		}
		return out[i].Started.After(out[j].Started)
	})
	return out
}

// cancelTasks cancels the running tasks of a plugin ("" for all).
func (h *Host) cancelTasks(pluginKey string) {
	ts := h.taskList()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, t := range ts.byID {
		if pluginKey == "" || t.p.Key() == pluginKey {
			t.cancel()
		}
	}
}

// taskStopWait bounds how long shutdown waits for cancelled tasks.
const taskStopWait = 10 * time.Second

// stopTasks cancels every task and waits for them, within ctx and at most
// taskStopWait (a task that ignores its ctx is left behind).
func (h *Host) stopTasks(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, taskStopWait)
	defer cancel()
	ts := h.taskList()
	ts.mu.Lock()
	ts.stop()
	ts.mu.Unlock()
	done := make(chan struct{})
	go func() { ts.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		h.log.Warn("background tasks did not stop in time")
	}
}

// taskSender is a task's way to the chat: system pushes only (the
// agent's PushSystem); posting as the assistant is for runs.
type taskSender struct {
	h       *Host
	chatKey string
}

func (s taskSender) AddSystem(ctx context.Context, text string, wake bool) error {
	return s.h.pushSystem(ctx, s.chatKey, text, wake)
}

func (taskSender) SendText(context.Context, string) error { return errTaskSend }
func (taskSender) SendFile(context.Context, string, io.Reader) error {
	return errTaskSend
}
func (taskSender) SendImage(context.Context, string, io.Reader) error {
	return errTaskSend
}

var errTaskSend = errors.New("a background task tells the agent with ctx.PushSystem; it cannot post as the assistant")

func (s hostServices) StartTask(ctx context.Context, chatKey, id string, fn func(ctx *plugin.Ctx) error) error {
	return s.h.startTask(s.p, chatKey, id, fn)
}

func (s hostServices) CancelTask(chatKey, id string) bool {
	t := s.h.findTask(s.p.Key(), chatKey, id)
	if t == nil {
		return false
	}
	t.mu.Lock()
	running := t.info.Status == TaskRunning
	t.mu.Unlock()
	t.cancel()
	return running
}

func (s hostServices) NotifyTask(chatKey, id, key, data string) bool {
	t := s.h.findTask(s.p.Key(), chatKey, id)
	return t != nil && t.notify(key, data)
}
