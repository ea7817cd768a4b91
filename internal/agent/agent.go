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
//
// Files: agent.go is the Agent's API (Post, Exec, Reset, Shutdown);
// schedule.go the per-chat workers that run turns; turn.go the turn loop;
// prompt.go the prompt. The model is an llm.Model (internal/llm), and
// llm.None when none is configured.
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

	"github.com/nekro-go/nekro/internal/llm"

	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/host"
	"github.com/nekro-go/nekro/internal/keys"
	"github.com/nekro-go/nekro/internal/pluginhost"
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
	// CommandPrefix starts a chat command; default "/".
	CommandPrefix string
	// SuperUsers are the user ids that may use every command.
	SuperUsers []string
	// Python is the host's interpreter, used to tell a reply that is
	// code from one that is words; default /usr/bin/python3.
	Python string
	// ModelGroups are the operator's models besides the turns' own
	// ("chat"), by group name ("vision", ...), for plugins' Ctx.AskModel.
	// Ignored when Router is set.
	ModelGroups map[string]llm.Model
	// Router, when set, chooses the model of every request (turns, and
	// plugins' Ctx.AskModel) by group, following fallbacks, read anew for
	// each request (internal/models); the model given to New is then
	// unused.
	Router llm.Router
	// Persona, when set, returns the persona a chat's turns speak as
	// (its text joins the system prompt, its language the prompt's fixed
	// parts and the notices users read); nil or an error: none, English.
	Persona func(ctx context.Context, chatKey string) (Persona, error)
	// Memory, when set, recalls memories into each turn's prompt, learns
	// after each turn and forgets a reset chat (internal/memory).
	Memory Memory
	// Observer, when set, is told how every turn ended (nekro's metrics).
	Observer TurnObserver
	// OnReset, when set, erases what other parts keep of a chat when it
	// is reset (its knowledge base scope), after the plugins' hooks.
	OnReset func(ctx context.Context, chatKey string) error
	// Storage, when set, reports whether the data directory can take
	// writes (nil: yes; files.CheckSpace). A chat whose turn the storage
	// cut short waits until it can before its messages are claimed again,
	// so a full disk costs no model request per retry (storage.go).
	Storage func() error
	Log     *slog.Logger
}

// Agent runs turns for every chat, its code run by the plugin host.
type Agent struct {
	cfg     Config
	plugins *host.Host // runs the code, with the plugins' hooks and methods
	chats   *chat.Service
	router  llm.Router
	log     *slog.Logger

	base       context.Context // parent of every turn; cancelled by Shutdown's deadline
	cancelBase context.CancelFunc
	turnSlots  chan struct{}
	wg         sync.WaitGroup

	isPython func(ctx context.Context, src string) bool

	mu       sync.Mutex
	closing  bool
	state    map[string]*chatState
	stopPoll chan struct{} // closed when Shutdown begins: ends the poll for waiting messages

	live         map[int64]*liveTurn // this replica's running turns, by id (lease.go)
	heartbeating bool                // the heartbeat goroutine runs (a.mu)
	stopHB       chan struct{}       // closed once Shutdown has let every turn end
	hbWG         sync.WaitGroup

	waits commandWaits // commands' questions to their senders (wait.go)
}

// New returns an agent answering through model. With no model configured,
// pass llm.None{Reason: why} (nil means llm.None{Reason: llm.ErrNoModel}):
// Post then fails with the reason, and runs without a model still work.
func New(h *host.Host, chats *chat.Service, model llm.Model, cfg Config) *Agent {
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
	if cfg.CommandPrefix == "" {
		cfg.CommandPrefix = DefaultCommandPrefix
	}
	if model == nil {
		model = llm.None{Reason: llm.ErrNoModel}
	}
	router := cfg.Router
	if router == nil {
		router = llm.Static{Default: model, Groups: cfg.ModelGroups}
	}
	base, cancel := context.WithCancel(context.Background())
	a := &Agent{cfg: cfg, plugins: h, chats: chats, router: router, log: cfg.Log, base: base, cancelBase: cancel,
		turnSlots: make(chan struct{}, cfg.MaxConcurrentTurns), state: map[string]*chatState{},
		stopPoll: make(chan struct{}), stopHB: make(chan struct{})}
	python := cfg.Python
	if python == "" {
		python = "/usr/bin/python3"
	}
	a.isPython = pythonParses(python)
	chats.OnWake(a.wake)
	chats.SetRecoveryNotice(func(ctx context.Context, chatKey string) string {
		return notices[langOf(a.persona(ctx, chatKey).Lang)]
	})
	h.OnPush(a.PushSystem)
	return a
}

// wake schedules a turn for a system message that woke the agent, when a
// model can answer it (else the message waits for one).
func (a *Agent) wake(chatKey string) {
	if err := a.ModelError(); err != nil {
		a.log.Warn("a plugin woke the agent, but no model can answer", "chat", chatKey, "err", err)
		return
	}
	a.schedule(chatKey)
}

// PushSystem adds text to chatKey as a system message, screened by the
// plugins' OnSystemMessage hooks; with trigger (unless a hook says
// BlockTrigger) a turn answers it, queued behind a running one and
// claimed once, also across hosts. What plugins call outside a run
// (Plugin.PushSystem: timers, webhooks, tasks).
func (a *Agent) PushSystem(ctx context.Context, chatKey, text string, trigger bool) error {
	if err := keys.Scope("chat", chatKey); err != nil {
		return err
	}
	if strings.TrimSpace(text) == "" {
		return errors.New("the system message is empty")
	}
	switch a.plugins.SystemMessageSignal(ctx, chatKey, text) {
	case plugin.BlockAll:
		a.log.Debug("a plugin's hook dropped a system message", "chat", chatKey)
		return nil
	case plugin.BlockTrigger:
		trigger = false
	case plugin.ForceTrigger:
		trigger = true
	}
	if trigger {
		// A timer's firing past the chat's budget is kept, unanswered
		// until the chat's next turn, and says so.
		if ok, note := a.plugins.AllowTimerTurn(ctx, chatKey); !ok {
			trigger = false
			text = note + "\n" + text
		}
	}
	if _, err := a.chats.AddMessage(ctx, chat.Message{ChatKey: chatKey, Role: chat.System, SenderID: chat.SystemID,
		SenderName: "SYSTEM", Text: chat.TruncateText(text), Wake: trigger}); err != nil {
		return err
	}
	if trigger {
		a.wake(chatKey)
	}
	return nil
}

// ModelError returns nil when a model is configured, else why not and
// how to configure one.
func (a *Agent) ModelError() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return a.router.Ready(ctx)
}

// Incoming is a user's message.
type Incoming struct {
	ChatKey  string
	UserID   string
	UserName string
	// Text may be empty when the message carries files.
	Text string
	// Upload holds the files sent with the message, already stored in
	// the chat's uploads (chat.Service.NewUpload, then Add for each): they
	// become the message's attachments, which the history and the prompt
	// show with their sandbox paths (/app/uploads/<name>). When Post
	// stores no message (an error, or a hook dropped it) it removes them,
	// so a message and its files are kept together or not at all.
	Upload *chat.Upload
	// Admin says the sender administers the chat (a chat platform's
	// group owner or admin): commands for admins answer them.
	Admin bool
	// Quiet stores the message as context for later turns without
	// starting one (a chat platform's group message not addressed to the
	// bot), unless a plugin's hook says ForceTrigger. Commands are still
	// answered, and no model is needed to store it.
	Quiet bool
	// Queue stores the message for the process that serves the chat
	// instead of starting a turn here, so this process needs no model:
	// a `nekro serve` on the same database answers it within PollInterval
	// (or when it next starts). What `nekro chats send` does. Commands are
	// still answered at once, and message hooks still run.
	Queue bool
}

// ErrClosed is returned once Shutdown has begun.
var ErrClosed = errors.New("the agent is shutting down")

// Post stores a user's message and schedules a turn to answer it. It
// returns as soon as the message is stored.
func (a *Agent) Post(ctx context.Context, in Incoming) (_ chat.Message, err error) {
	defer func() {
		if err != nil {
			if derr := in.Upload.Discard(); derr != nil {
				a.log.Error("remove the files of a message not stored", "chat", in.ChatKey, "err", derr)
			}
		}
	}()
	if err := keys.Scope("chat", in.ChatKey); err != nil {
		return chat.Message{}, err
	}
	if err := keys.Scope("user", in.UserID); err != nil {
		return chat.Message{}, err
	}
	if in.Upload != nil && in.Upload.ChatKey() != in.ChatKey {
		return chat.Message{}, fmt.Errorf("the files were stored for chat %s, not %s", in.Upload.ChatKey(), in.ChatKey)
	}
	attachments := in.Upload.Attachments()
	if strings.TrimSpace(in.Text) == "" && len(attachments) == 0 {
		return chat.Message{}, errors.New("the message is empty: send a text, a file, or both")
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
	msg := chat.Message{ChatKey: in.ChatKey, Role: chat.User, SenderID: in.UserID, SenderName: name, Text: in.Text,
		Attachments: attachments}
	// A chat command is answered by its plugin, with no model and no turn;
	// both messages stay in the history.
	if answer, ok := a.command(ctx, in); ok {
		msg.TurnID = chat.NoTurn
		m, err := a.chats.AddMessage(ctx, msg)
		if err != nil {
			return chat.Message{}, err
		}
		if _, err := a.chats.AddMessage(ctx, chat.Message{ChatKey: in.ChatKey, Role: chat.Assistant, SenderID: chat.AssistantID,
			SenderName: "assistant", Text: chat.TruncateText(answer.Text), Attachments: answer.Files}); err != nil {
			return chat.Message{}, err
		}
		return m, nil
	}
	if err := a.ModelError(); err != nil && !in.Quiet && !in.Queue {
		return chat.Message{}, err
	}
	signal := a.plugins.UserMessageSignal(ctx, in.ChatKey, in.UserID, in.Text)
	switch signal {
	case plugin.BlockAll:
		return chat.Message{}, ErrDropped
	case plugin.Continue:
		if in.Quiet {
			signal = plugin.BlockTrigger
		}
	}
	if signal == plugin.BlockTrigger {
		msg.TurnID = chat.NoTurn // in the history, never claimed by a turn
	} else if err := a.ModelError(); err != nil && !in.Queue {
		return chat.Message{}, err // a quiet message a hook wants answered, and no model
	}
	// ForceTrigger answers as Continue does: every message a user writes
	// here is answered, unless it came Quiet (a chat platform's rule).
	m, err := a.chats.AddMessage(ctx, msg)
	if err != nil {
		return chat.Message{}, err
	}
	if signal != plugin.BlockTrigger && !in.Queue {
		a.schedule(in.ChatKey)
	}
	return m, nil
}

// ErrDropped is Post's answer when a plugin's message hook dropped the
// message (plugin.BlockAll).
var ErrDropped = errors.New("a plugin's message hook dropped the message")

// Prompt returns the first request a turn in chatKey would send the model
// now, for userID (may be empty): the system prompt with the chat's
// methods, the plugins' injected context and the history, the chat's
// unanswered messages as those to answer. Older history that does not fit
// the model's window shows as the kept summary; a summary is never
// written here.
func (a *Agent) Prompt(ctx context.Context, chatKey, userID string) ([]llm.ChatMessage, error) {
	history, err := a.chats.History(ctx, chatKey, a.cfg.MaxHistory)
	if err != nil {
		return nil, err
	}
	var answering []chat.Message
	for i := len(history) - 1; i >= 0 && history[i].Role == chat.User; i-- {
		answering = append([]chat.Message{history[i]}, answering...)
	}
	msgs, _ := a.turnPrompt(ctx, a.plugins.ChatView(ctx, chatKey, userID), a.persona(ctx, chatKey), chatKey, history, answering, nil)
	return msgs, nil
}

// Exec runs code in the chat's sandbox without a model (the API's
// playground, `nekro exec`): what plugins send lands in the chat, BEHAVIOR
// results are recorded as system messages, and the run is recorded, as in
// a turn. Zero fields of limits keep the agent's.
func (a *Agent) Exec(ctx context.Context, chatKey, userID, code string, limits sandbox.Limits) (*runtime.ExecResult, error) {
	if limits == (sandbox.Limits{}) {
		limits = a.cfg.Limits
	}
	if _, err := a.chats.SyncUploads(ctx, chatKey); err != nil {
		return nil, err
	}
	snd := a.chats.Sender(chatKey, 0)
	res, err := a.plugins.Exec(ctx, runtime.ExecRequest{
		ChatKey: chatKey, UserID: userID, Code: code, Limits: limits,
		Chat: snd, Methods: a.plugins.ChatMethods(ctx, chatKey, userID), // what a turn in this chat could call
		Model: a.askModel(nil), History: a.historyOf(chatKey),
		OnResult: func(m *pluginhost.MethodInfo, result json.RawMessage) {
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
	st.resets++
	if st.cancel != nil {
		st.cancel()
	}
	a.mu.Unlock()
	st.busy.Lock()
	defer func() {
		st.busy.Unlock()
		a.mu.Lock()
		st.resets--
		a.dropIdle(chatKey, st)
		a.mu.Unlock()
	}()
	n, err := a.chats.Reset(ctx, chatKey)
	if err != nil {
		return 0, err
	}
	err = a.plugins.ResetChat(ctx, chatKey)
	if a.cfg.OnReset != nil {
		err = errors.Join(err, a.cfg.OnReset(ctx, chatKey))
	}
	if err != nil {
		return n, fmt.Errorf("chat %s was reset, but: %w", chatKey, err)
	}
	if err := a.forgetChat(ctx, chatKey); err != nil {
		return n, fmt.Errorf("chat %s was reset, but its memories were not erased: %w", chatKey, err)
	}
	return n, nil
}

// Shutdown stops taking messages and lets the turns in progress finish
// until ctx ends; then it stops them (their runs end as MANUAL) and waits
// for them to record how they ended. Messages still waiting are answered
// after the next start.
func (a *Agent) Shutdown(ctx context.Context) error {
	a.mu.Lock()
	if !a.closing {
		close(a.stopPoll)
	}
	a.closing = true
	a.mu.Unlock()
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
		a.cancelBase()
		a.stopHeartbeat()
		return nil
	case <-ctx.Done():
	}
	a.cancelBase()
	<-done
	a.stopHeartbeat()
	return fmt.Errorf("turns still running at the deadline were stopped: %w", ctx.Err())
}

// stopHeartbeat ends the renewal of turn leases once no turn runs.
func (a *Agent) stopHeartbeat() {
	a.mu.Lock()
	select {
	case <-a.stopHB:
	default:
		close(a.stopHB)
	}
	a.mu.Unlock()
	a.hbWG.Wait()
}
