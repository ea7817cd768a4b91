package agent

// The turn loop: prompt, model, run, feedback, until the code ends the
// turn or MaxIterations runs were made.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nekro-go/nekro/internal/llm"

	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/plugin"
)

// runTurn is the loop of one turn. It sets turn's status and counters,
// and returns the time spent in sandbox runs and what recording the
// turn's end must do besides (the note a failure leaves in the chat).
func (a *Agent) runTurn(ctx context.Context, turn *chat.Turn, claimed []chat.Message) (sandboxTime time.Duration, end chat.TurnEnd) {
	chatKey := turn.ChatKey
	log := a.log.With("chat", chatKey, "turn", turn.ID)
	persona := a.persona(ctx, chatKey)
	// A turn that does not answer tells the chat's users so, once, in
	// words for them; the details stay in the note and the turn's record.
	defer func() {
		if turn.Status != chat.TurnDone {
			end.Notice = notices[langOf(persona.Lang)]
		}
	}()
	fail := func(status, format string, args ...any) {
		turn.Status, turn.Error = status, fmt.Sprintf(format, args...)
		if ctx.Err() != nil && status == chat.TurnFailed {
			turn.Status = chat.TurnInterrupted
		}
		log.Warn("turn ended early", "status", turn.Status, "error", turn.Error)
		end.Note = "nekro: " + turn.Error // stored with the turn's end (chat.EndTurn)
	}
	// A failure of the database or the disk is the host's, not the
	// model's: the turn says what failed, without its details, and hands
	// its messages back for the next turn (once the failure is over).
	failStorage := func(what string, err error) bool {
		problem := storageProblem(err)
		if problem == "" {
			return false
		}
		log.Warn("turn cut short by storage", "what", what, "err", err)
		turn.Status, turn.Error = chat.TurnInterrupted, fmt.Sprintf("could not %s: %s", what, problem)
		end.Note, end.Retry = "nekro: the turn could not finish: "+problem+".", true
		return true
	}
	// Files other replicas stored for the chat, for its runs to read.
	if _, err := a.chats.SyncUploads(ctx, chatKey); err != nil {
		if !failStorage("fetch the chat's files", err) {
			fail(chat.TurnFailed, "could not fetch the chat's files: %v", err)
		}
		return
	}
	history, err := a.chats.History(ctx, chatKey, a.cfg.MaxHistory)
	if err != nil {
		if !failStorage("read the history", err) {
			fail(chat.TurnFailed, "could not read the history: %v", err)
		}
		return
	}
	lastSeen := int64(0)
	for _, m := range history {
		lastSeen = max(lastSeen, m.ID)
	}
	userID := turnUser(claimed)
	since := turnSince(turn, claimed)
	view := a.plugins.ChatView(ctx, chatKey, userID)
	var pluginUse modelUse // plugins' own model requests, counted with the turn's
	defer func() {
		turn.Requests += int(pluginUse.requests.Load())
		turn.ModelUS += pluginUse.micros.Load()
	}()
	// A summary the prompt needs first counts with the turn's requests.
	msgs, pctx := a.turnPrompt(ctx, view, persona, chatKey, history, claimed, &pluginUse)
	turn.Context = pctx
	for i := 1; i <= a.cfg.MaxIterations; i++ {
		// The reply may be code: its sandbox starts while the model
		// writes, and the run takes it (no sandbox is started after a
		// run for a next one that may never come).
		a.plugins.Prewarm(chatKey, a.cfg.Limits, view.Methods, since)
		comp, err := a.router.Route(ctx, "", msgs)
		turn.Requests++
		if comp.Group != "" {
			turn.ModelGroup = comp.Group
		}
		turn.ModelUS += comp.Duration.Microseconds()
		if err != nil {
			fail(chat.TurnFailed, "the model did not answer: %v", err)
			return
		}
		// A reply that is words, not code, is the assistant's message.
		if prose := proseOf(ctx, comp.Text, a.isPython); prose != "" {
			if _, err := a.chats.AddMessage(context.WithoutCancel(ctx), chat.Message{ChatKey: chatKey, Role: chat.Assistant,
				SenderID: chat.AssistantID, SenderName: "assistant", Text: chat.TruncateText(prose), TurnID: turn.ID}); err != nil {
				if !failStorage("store the reply", err) {
					fail(chat.TurnFailed, "could not store the reply: %v", err)
				}
				return
			}
			turn.Status = chat.TurnDone
			return
		}
		code := ExtractCode(comp.Text)

		// Messages this run stores to carry an agent result; the
		// feedback already contains that result.
		var agentMsgIDs sync.Map
		execStart := time.Now()
		snd := a.chats.Sender(chatKey, turn.ID) // a new budget for every run
		res, err := a.plugins.Exec(ctx, runtime.ExecRequest{
			ChatKey: chatKey, UserID: userID, Code: code, Limits: a.cfg.Limits, Prewarmed: true, Since: since,
			Chat: snd, Methods: view.Methods, Model: a.askModel(&pluginUse),
			History: a.historyOf(chatKey),
			OnResult: func(m *pluginhost.MethodInfo, result json.RawMessage) {
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
			if !failStorage("read the history", err) {
				fail(chat.TurnFailed, "could not read the history: %v", err)
			}
			return
		}
		msgs = append(msgs, llm.TextMessage("assistant", comp.Text))
		switch res.StopType {
		case sandbox.AgentStop:
			var text string
			if err := json.Unmarshal(res.AgentResult, &text); err != nil {
				text = string(res.AgentResult)
			}
			msgs = append(msgs, llm.TextMessage("user", agentFeedback(res.AgentMethod, chat.TruncateText(text), news)))
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
			msgs = append(msgs, llm.ChatMessage{Role: "user", Content: llm.Content{Parts: content}})
		default:
			msgs = append(msgs, llm.TextMessage("user",
				failureFeedback(res.StopType, res.Note, res.Output, i, a.cfg.MaxIterations, news)))
		}
	}
	return sandboxTime, end
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
	user := ""
	for _, m := range claimed {
		switch {
		case m.Role != chat.User: // a plugin's push: no user of its own
		case user == "":
			user = m.SenderID
		case m.SenderID != user:
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
			p.Text = plugin.EscapePromptTags(chat.TruncateText(p.Text))
		}
		out[i] = p
	}
	return out
}

// recordResult stores BEHAVIOR results (and the results of the agent
// methods, for later turns) as system messages of the chat, as they
// happen, through the run's sender: cut to chat.MaxTextBytes, and within
// the run's message budget. It returns the stored message's id, or 0.
func (a *Agent) recordResult(ctx context.Context, snd *chat.RunSender, m *pluginhost.MethodInfo, result json.RawMessage) int64 {
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
		Calls: calls, Note: res.Note, AgentMethod: res.AgentMethod, AgentResult: result, ModelGroup: turn.ModelGroup,
		Context: turn.Context}
}

// modelUse counts model requests plugins make during a turn.
type modelUse struct {
	requests atomic.Int64
	micros   atomic.Int64
}

// askModel is a run's model access for its plugins (Ctx.AskModel),
// counting into use when not nil.
func (a *Agent) askModel(use *modelUse) func(ctx context.Context, group string, parts []plugin.ContentPart) (string, error) {
	return func(ctx context.Context, group string, parts []plugin.ContentPart) (string, error) {
		if len(parts) == 0 {
			return "", fmt.Errorf("the question is empty")
		}
		comp, err := a.router.Route(ctx, group, []llm.ChatMessage{{Role: "user", Content: llm.Content{Parts: parts}}})
		if use != nil {
			use.requests.Add(int64(max(comp.Attempts, 1)))
			use.micros.Add(comp.Duration.Microseconds())
		}
		if err != nil {
			return "", err
		}
		return comp.Text, nil
	}
}

// historyOf is a run's access to its own chat's history (Ctx.History).
func (a *Agent) historyOf(chatKey string) func(ctx context.Context, limit int) ([]string, error) {
	return func(ctx context.Context, limit int) ([]string, error) {
		if limit <= 0 || limit > a.cfg.MaxHistory*10 {
			limit = a.cfg.MaxHistory * 10
		}
		ms, err := a.chats.History(ctx, chatKey, limit)
		if err != nil {
			return nil, err
		}
		out := make([]string, len(ms))
		for i, m := range ms {
			out[i] = strings.TrimRight(renderMessage(m), "\n")
		}
		return out, nil
	}
}

// turnSince is when the work of a turn began, for the runtime's slots
// (ExecRequest.Since): when the oldest message it answers arrived, or
// when it started.
func turnSince(turn *chat.Turn, claimed []chat.Message) time.Time {
	since := turn.StartedAt
	for _, m := range claimed {
		if !m.Time.IsZero() && m.Time.Before(since) {
			since = m.Time
		}
	}
	return since
}
