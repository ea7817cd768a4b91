// Package agent answers chat messages: it builds the prompt (the runtime
// contract, the enabled plugins' method docs, the chat history), asks an
// OpenAI-compatible model for a Python script, runs the script in the
// chat's sandbox and acts on how the run ended, as each method type
// demands:
//
//   - NORMAL ends the turn;
//   - AGENT puts the method's result into the conversation and asks the
//     model again;
//   - MULTIMODAL_AGENT does the same with its content parts, images
//     included, as a multimodal user message;
//   - BEHAVIOR results are recorded as system messages while the code runs
//     and cause no new request;
//   - ERROR, TIMEOUT and MANUAL send the capped output back for a retry.
//
// A turn makes at most MaxIterations runs, and every model reply that is
// requested is run (the reference requests one more that it never runs).
// One turn runs at a time per chat; messages that arrive meanwhile wait
// and are answered by the next turn.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/keys"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/plugin"
)

// Defaults of Config.
const (
	DefaultMaxIterations      = 3
	DefaultMaxHistory         = 100
	DefaultMaxConcurrentTurns = 64
	DefaultTurnTimeout        = 15 * time.Minute
	// MaxMessageBytes caps a user's message, as the chat caps every
	// message.
	MaxMessageBytes = chat.MaxTextBytes
)

// Config tunes an Agent. The zero value uses the defaults.
type Config struct {
	// MaxIterations bounds the sandbox runs (and so the model requests)
	// of one turn.
	MaxIterations int
	// MaxHistory is how many of the chat's latest messages the prompt shows.
	MaxHistory int
	// MaxConcurrentTurns bounds turns in progress across chats; sandbox
	// runs are bounded separately by the runtime.
	MaxConcurrentTurns int
	// TurnTimeout bounds one turn, model time included.
	TurnTimeout time.Duration
	// Limits of each run of a turn; zero fields keep the runtime's.
	Limits sandbox.Limits
	// NoModel, when Model is nil, says why (returned by Post).
	NoModel error
	Log     *slog.Logger
}

// Agent runs turns for every chat of a runtime.
type Agent struct {
	cfg   Config
	rt    *runtime.Runtime
	chats *chat.Service
	model Model
	log   *slog.Logger

	base       context.Context // parent of every turn; cancelled by Shutdown's deadline
	cancelBase context.CancelFunc
	turnSlots  chan struct{}
	wg         sync.WaitGroup

	mu      sync.Mutex
	closing bool
	state   map[string]*chatState
}

// chatState serializes a chat's turns.
type chatState struct {
	busy    sync.Mutex // held while a turn (or a reset) runs
	running bool       // a worker goroutine exists (guarded by Agent.mu)
	pending bool       // a message arrived since the worker last looked (Agent.mu)
	cancel  context.CancelFunc
}

// New returns an agent answering through model (nil: no model configured,
// and Post fails with cfg.NoModel or ErrNoModel).
func New(rt *runtime.Runtime, chats *chat.Service, model Model, cfg Config) *Agent {
	if cfg.MaxIterations <= 0 {
		cfg.MaxIterations = DefaultMaxIterations
	}
	if cfg.MaxHistory <= 0 {
		cfg.MaxHistory = DefaultMaxHistory
	}
	if cfg.MaxConcurrentTurns <= 0 {
		cfg.MaxConcurrentTurns = DefaultMaxConcurrentTurns
	}
	if cfg.TurnTimeout <= 0 {
		cfg.TurnTimeout = DefaultTurnTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.NoModel == nil {
		cfg.NoModel = ErrNoModel
	}
	base, cancel := context.WithCancel(context.Background())
	return &Agent{cfg: cfg, rt: rt, chats: chats, model: model, log: cfg.Log, base: base, cancelBase: cancel,
		turnSlots: make(chan struct{}, cfg.MaxConcurrentTurns), state: map[string]*chatState{}}
}

// ModelError returns nil when a model is configured, else why not and
// how to configure one.
func (a *Agent) ModelError() error {
	if a.model != nil {
		return nil
	}
	return a.cfg.NoModel
}

// Incoming is a user's message.
type Incoming struct {
	ChatKey  string
	UserID   string
	UserName string
	Text     string
}

// ErrClosed is returned once Shutdown has begun.
var ErrClosed = errors.New("the agent is shutting down")

// Post stores a user's message and schedules a turn to answer it. It
// returns as soon as the message is stored.
func (a *Agent) Post(ctx context.Context, in Incoming) (chat.Message, error) {
	if a.model == nil {
		return chat.Message{}, a.cfg.NoModel
	}
	if err := keys.Scope("chat", in.ChatKey); err != nil {
		return chat.Message{}, err
	}
	if err := keys.Scope("user", in.UserID); err != nil {
		return chat.Message{}, err
	}
	if strings.TrimSpace(in.Text) == "" {
		return chat.Message{}, errors.New("the message text is empty")
	}
	if len(in.Text) > MaxMessageBytes {
		return chat.Message{}, fmt.Errorf("the message is %d bytes, over the limit of %d", len(in.Text), MaxMessageBytes)
	}
	a.mu.Lock()
	closing := a.closing
	a.mu.Unlock()
	if closing {
		return chat.Message{}, ErrClosed
	}
	name := in.UserName
	if name == "" {
		name = in.UserID
	}
	m, err := a.chats.AddMessage(ctx, chat.Message{ChatKey: in.ChatKey, Role: chat.User, SenderID: in.UserID,
		SenderName: name, Text: in.Text})
	if err != nil {
		return chat.Message{}, err
	}
	a.schedule(in.ChatKey)
	return m, nil
}

// Resume prepares the agent after a start: turns a stopped host left
// running are marked interrupted, and chats with unanswered messages get
// a turn. Without a model it only does the former.
func (a *Agent) Resume(ctx context.Context) error {
	n, err := a.chats.InterruptStale(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		a.log.Warn("turns interrupted by the last stop", "count", n)
	}
	if a.model == nil {
		return nil
	}
	keys, err := a.chats.WaitingChats(ctx)
	if err != nil {
		return err
	}
	for _, k := range keys {
		a.schedule(k)
	}
	return nil
}

func (a *Agent) stateOf(chatKey string) *chatState {
	st := a.state[chatKey]
	if st == nil {
		st = &chatState{}
		a.state[chatKey] = st
	}
	return st
}

// schedule makes sure a worker will claim the chat's waiting messages.
func (a *Agent) schedule(chatKey string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closing {
		return // the messages wait in the database for the next start
	}
	st := a.stateOf(chatKey)
	st.pending = true
	if st.running {
		return
	}
	st.running = true
	a.wg.Add(1)
	go a.worker(chatKey, st)
}

// worker runs the chat's turns until no message waits.
func (a *Agent) worker(chatKey string, st *chatState) {
	defer a.wg.Done()
	for {
		a.mu.Lock()
		if !st.pending || a.closing {
			st.running = false
			a.mu.Unlock()
			return
		}
		st.pending = false
		a.mu.Unlock()

		select {
		case a.turnSlots <- struct{}{}:
		case <-a.base.Done():
			a.mu.Lock()
			st.running = false
			a.mu.Unlock()
			return
		}
		st.busy.Lock()
		err := a.claimAndRun(chatKey, st)
		st.busy.Unlock()
		<-a.turnSlots
		if err != nil {
			a.log.Error("turn failed", "chat", chatKey, "err", err)
		}
	}
}

// claimAndRun claims the waiting messages and answers them; messages that
// arrive during the turn set pending again, so the worker loops.
func (a *Agent) claimAndRun(chatKey string, st *chatState) error {
	ctx, cancel := context.WithTimeout(a.base, a.cfg.TurnTimeout)
	defer cancel()
	a.mu.Lock()
	st.cancel = cancel
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		st.cancel = nil
		a.mu.Unlock()
	}()
	start := time.Now()
	turn, claimed, err := a.chats.ClaimTurn(ctx, chatKey)
	if err != nil || turn == nil {
		return err
	}
	claimTime := time.Since(start)
	runs := a.runTurn(ctx, turn, claimed)
	// Record the end even when the turn's context is gone.
	err = a.chats.FinishTurn(context.WithoutCancel(ctx), turn)
	a.log.Debug("turn finished", "chat", chatKey, "turn", turn.ID, "status", turn.Status, "runs", turn.Iterations,
		"total", time.Since(start), "claim", claimTime, "model", time.Duration(turn.ModelUS)*time.Microsecond, "sandbox", runs)
	return err
}

// runTurn is the loop of one turn. It sets turn's status and counters,
// and returns the time spent in sandbox runs.
func (a *Agent) runTurn(ctx context.Context, turn *chat.Turn, claimed []chat.Message) (sandboxTime time.Duration) {
	chatKey := turn.ChatKey
	log := a.log.With("chat", chatKey, "turn", turn.ID)
	fail := func(status, format string, args ...any) {
		turn.Status, turn.Error = status, fmt.Sprintf(format, args...)
		if ctx.Err() != nil && status == chat.TurnFailed {
			turn.Status = chat.TurnInterrupted
		}
		log.Warn("turn ended early", "status", turn.Status, "error", turn.Error)
		if _, err := a.chats.AddMessage(context.WithoutCancel(ctx), chat.Message{ChatKey: chatKey, Role: chat.System,
			SenderID: chat.SystemID, SenderName: "SYSTEM", Text: chat.TruncateText("nekro: " + turn.Error), TurnID: turn.ID}); err != nil {
			log.Error("record turn failure", "err", err)
		}
	}
	history, err := a.chats.History(ctx, chatKey, a.cfg.MaxHistory)
	if err != nil {
		fail(chat.TurnFailed, "could not read the history: %v", err)
		return
	}
	lastSeen := int64(0)
	for _, m := range history {
		lastSeen = max(lastSeen, m.ID)
	}
	msgs := []ChatMessage{
		TextMessage("system", SystemPrompt(a.rt.Registry().RenderMethods())),
		TextMessage("user", HistoryPrompt(chatKey, history, claimed)),
	}
	userID := turnUser(claimed)
	for i := 1; i <= a.cfg.MaxIterations; i++ {
		comp, err := a.model.Complete(ctx, msgs)
		turn.Requests++
		turn.ModelUS += comp.Duration.Microseconds()
		if err != nil {
			fail(chat.TurnFailed, "the model did not answer: %v", err)
			return
		}
		code := ExtractCode(comp.Text)

		// Messages this run stores to carry an agent result; the
		// feedback already contains that result.
		var agentMsgIDs sync.Map
		execStart := time.Now()
		snd := a.chats.Sender(chatKey, turn.ID) // a new budget for every run
		res, err := a.rt.Exec(ctx, runtime.ExecRequest{
			ChatKey: chatKey, UserID: userID, Code: code, Limits: a.cfg.Limits,
			Chat: snd,
			OnResult: func(m *plugin.MethodInfo, result json.RawMessage) {
				if id := a.recordResult(ctx, snd, m, result); id != 0 && m.Type.EndsRun() {
					agentMsgIDs.Store(id, true)
				}
			},
		})
		sandboxTime += time.Since(execStart)
		turn.Iterations++
		if err != nil {
			fail(chat.TurnFailed, "the sandbox run could not start: %v", err)
			return
		}
		if err := a.chats.RecordRun(context.WithoutCancel(ctx), runRecord(turn, i, code, res)); err != nil {
			log.Error("record run", "err", err)
		}
		if res.StopType == sandbox.Normal {
			turn.Status = chat.TurnDone
			return
		}
		if ctx.Err() != nil {
			fail(chat.TurnInterrupted, "the turn was stopped (%v) during run %s", context.Cause(ctx), res.RunID)
			return
		}
		if i == a.cfg.MaxIterations {
			fail(chat.TurnFailed, "gave up after %d runs; the last ended with %s", i, res.StopType)
			return
		}
		news, err := a.newMessages(ctx, chatKey, &lastSeen, turn.ID, &agentMsgIDs)
		if err != nil {
			fail(chat.TurnFailed, "could not read the history: %v", err)
			return
		}
		msgs = append(msgs, TextMessage("assistant", comp.Text))
		switch res.StopType {
		case sandbox.AgentStop:
			var text string
			if err := json.Unmarshal(res.AgentResult, &text); err != nil {
				text = string(res.AgentResult)
			}
			msgs = append(msgs, TextMessage("user", agentFeedback(res.AgentMethod, chat.TruncateText(text), news)))
		case sandbox.MultimodalAgent:
			var parts []plugin.ContentPart
			if err := json.Unmarshal(res.AgentResult, &parts); err != nil {
				fail(chat.TurnFailed, "multimodal result of %s does not decode: %v", res.AgentMethod, err)
				return
			}
			content := []plugin.ContentPart{plugin.TextPart(fmt.Sprintf(
				"[Multimodal Agent Method Response] %s returned the following content:", res.AgentMethod))}
			content = append(content, capParts(parts)...)
			content = append(content, plugin.TextPart("[result end]\nThe code after the agent method call was NOT executed. "+
				"Continue based on this response with one Python script."+newMessagesText(news)))
			msgs = append(msgs, ChatMessage{Role: "user", Content: Content{Parts: content}})
		default:
			msgs = append(msgs, TextMessage("user",
				failureFeedback(res.StopType, res.Note, res.Output, i, a.cfg.MaxIterations, news)))
		}
	}
	return sandboxTime
}

// turnUser is the user a turn's runs act for: the sender of the claimed
// messages when they all come from one user, else nobody.
//
// A run acts with its user's identity, and the user's KV scope spans
// chats, so a turn answering users A and B must act as neither: code
// written in answer to A's message would otherwise read (or overwrite)
// B's private data. With no user, user-scoped store calls fail with a
// clear error that reaches the model, and the prompt says why. (The other
// choice, one sender's messages per turn, keeps per-user data reachable
// but splits a group's exchange into turns that each see part of it; a
// turn answering one user, the common case, acts as that user.)
func turnUser(claimed []chat.Message) string {
	if len(claimed) == 0 {
		return ""
	}
	user := claimed[0].SenderID
	for _, m := range claimed[1:] {
		if m.SenderID != user {
			return ""
		}
	}
	return user
}

// capParts cuts the text parts of a multimodal result as message texts
// are cut, so a result cannot blow up the next request.
func capParts(parts []plugin.ContentPart) []plugin.ContentPart {
	out := make([]plugin.ContentPart, len(parts))
	for i, p := range parts {
		if p.Type == "text" {
			p.Text = chat.TruncateText(p.Text)
		}
		out[i] = p
	}
	return out
}

// recordResult stores BEHAVIOR results (and the results of the agent
// methods, for later turns) as system messages of the chat, as they
// happen, through the run's sender: cut to chat.MaxTextBytes, and within
// the run's message budget. It returns the stored message's id, or 0.
func (a *Agent) recordResult(ctx context.Context, snd *chat.RunSender, m *plugin.MethodInfo, result json.RawMessage) int64 {
	var text string
	switch m.Type {
	case plugin.Behavior, plugin.Agent:
		if err := json.Unmarshal(result, &text); err != nil {
			text = string(result)
		}
		if m.Type == plugin.Agent {
			text = fmt.Sprintf("[agent method %s returned]\n%s", m.Name, text)
		}
	case plugin.MultimodalAgent:
		var parts []plugin.ContentPart
		json.Unmarshal(result, &parts)
		var texts []string
		images := 0
		for _, p := range parts {
			if p.Type == "text" {
				texts = append(texts, p.Text)
			} else {
				images++
			}
		}
		text = fmt.Sprintf("[multimodal agent method %s returned %d image(s)]\n%s", m.Name, images, strings.Join(texts, "\n"))
	default:
		return 0
	}
	msg, err := snd.Record(context.WithoutCancel(ctx), text)
	if err != nil {
		a.log.Warn("record method result", "method", m.Name, "err", err)
		return 0
	}
	return msg.ID
}

// newMessages returns the chat's messages after *lastSeen that the next
// request should mention: what the run sent and recorded, without the
// messages carrying the agent result (the feedback has it) and without
// user messages that wait for the next turn.
func (a *Agent) newMessages(ctx context.Context, chatKey string, lastSeen *int64, turnID int64, skip *sync.Map) ([]chat.Message, error) {
	recent, err := a.chats.History(ctx, chatKey, a.cfg.MaxHistory)
	if err != nil {
		return nil, err
	}
	var out []chat.Message
	for _, m := range recent {
		if m.ID <= *lastSeen {
			continue
		}
		*lastSeen = max(*lastSeen, m.ID)
		if _, agent := skip.Load(m.ID); agent {
			continue
		}
		if m.Role == chat.User && m.TurnID != turnID {
			continue
		}
		out = append(out, m)
	}
	return out, nil
}

// maxRecordedResult is the largest AGENT result a run record keeps whole;
// the model still gets all of it. With the RPC server's bounds on calls
// and the sandbox's on output, a run record stays within a few MiB.
const maxRecordedResult = 256 << 10

func runRecord(turn *chat.Turn, iteration int, code string, res *runtime.ExecResult) chat.Run {
	calls, _ := json.Marshal(res.Calls)
	result := res.AgentResult
	if len(result) > maxRecordedResult {
		result, _ = json.Marshal(fmt.Sprintf("[a result of %d bytes, over the %d KiB a run record keeps]", len(result), maxRecordedResult>>10))
	}
	return chat.Run{RunID: res.RunID, ChatKey: res.ChatKey, TurnID: turn.ID, Iteration: iteration, Code: code,
		Output: res.Output, StopType: res.StopType.String(), ExitCode: res.ExitCode, DurationMS: res.DurationMS,
		Calls: calls, Note: res.Note, AgentMethod: res.AgentMethod, AgentResult: result}
}

// Exec runs code in the chat's sandbox without a model (the API's
// playground, `nekro exec`): what plugins send lands in the chat, BEHAVIOR
// results are recorded as system messages, and the run is recorded, as in
// a turn. Zero fields of limits keep the agent's.
func (a *Agent) Exec(ctx context.Context, chatKey, userID, code string, limits sandbox.Limits) (*runtime.ExecResult, error) {
	if limits == (sandbox.Limits{}) {
		limits = a.cfg.Limits
	}
	snd := a.chats.Sender(chatKey, 0)
	res, err := a.rt.Exec(ctx, runtime.ExecRequest{
		ChatKey: chatKey, UserID: userID, Code: code, Limits: limits,
		Chat: snd,
		OnResult: func(m *plugin.MethodInfo, result json.RawMessage) {
			if m.Type == plugin.Behavior {
				a.recordResult(ctx, snd, m, result)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	if err := a.chats.RecordRun(context.WithoutCancel(ctx), runRecord(&chat.Turn{}, 1, code, res)); err != nil {
		a.log.Error("record run", "chat", chatKey, "err", err)
	}
	return res, nil
}

// Reset stops the chat's turn in progress, if any, clears the chat's
// history, discards its warm sandboxes and runs every plugin's
// on-channel-reset hooks. The API and `nekro chats reset` both reset
// through here.
func (a *Agent) Reset(ctx context.Context, chatKey string) error {
	_, err := a.ResetCount(ctx, chatKey)
	return err
}

// ResetCount is Reset, also saying how many messages were deleted.
func (a *Agent) ResetCount(ctx context.Context, chatKey string) (int64, error) {
	if err := keys.Scope("chat", chatKey); err != nil {
		return 0, err
	}
	a.mu.Lock()
	st := a.stateOf(chatKey)
	st.pending = false
	if st.cancel != nil {
		st.cancel()
	}
	a.mu.Unlock()
	st.busy.Lock()
	defer st.busy.Unlock()
	n, err := a.chats.Reset(ctx, chatKey)
	if err != nil {
		return 0, err
	}
	if err := a.rt.ResetChat(ctx, chatKey); err != nil {
		return n, fmt.Errorf("chat %s was reset, but: %w", chatKey, err)
	}
	return n, nil
}

// Shutdown stops taking messages and lets the turns in progress finish
// until ctx ends; then it stops them (their runs end as MANUAL) and waits
// for them to record how they ended. Messages still waiting are answered
// after the next start.
func (a *Agent) Shutdown(ctx context.Context) error {
	a.mu.Lock()
	a.closing = true
	a.mu.Unlock()
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
		a.cancelBase()
		return nil
	case <-ctx.Done():
	}
	a.cancelBase()
	<-done
	return fmt.Errorf("turns still running at the deadline were stopped: %w", ctx.Err())
}
