// Package chat keeps nekro's conversations: chats keyed by chat key, their
// messages (user, assistant and system, with attachments stored under the
// chat's uploads), the turns that answered them and the execution record
// of every sandbox run. It lives in the same database as the KV store, and
// it broadcasts what happens in a chat to subscribers (the HTTP server's
// event streams).
//
// Plugins never see a Service: they write to their run's chat through
// plugin.Ctx.SendText and friends, which land in a Sender bound to that
// one chat.
package chat

import (
	"encoding/json"
	"time"
)

// Role is who a message comes from.
type Role string

// Roles.
const (
	User      Role = "user"      // a person talking to the assistant
	Assistant Role = "assistant" // what the assistant sent (send_msg_text and friends)
	System    Role = "system"    // results of BEHAVIOR methods, notes from the host
)

// Sender ids of the messages the host writes.
const (
	AssistantID = "assistant"
	SystemID    = "system"
)

// Attachment is a file sent with a message. It is stored in the chat's
// uploads directory, where the chat's sandbox reads it at Path.
type Attachment struct {
	Name string `json:"name"`
	Kind string `json:"kind"`           // "file" or "image"
	Path string `json:"path"`           // sandbox path, /app/uploads/<name>
	MIME string `json:"mime,omitempty"` // sniffed from the content
	Size int64  `json:"size"`
}

// Message is one message of a chat.
type Message struct {
	ID          int64        `json:"id"`
	ChatKey     string       `json:"chat_key"`
	Role        Role         `json:"role"`
	SenderID    string       `json:"sender_id"`
	SenderName  string       `json:"sender_name"`
	Text        string       `json:"text"`
	Attachments []Attachment `json:"attachments"`
	// TurnID is, for a user message, the turn that answered it (0 while
	// it waits); for the others, the turn during which it was written.
	TurnID int64     `json:"turn_id,omitempty"` // NoTurn: kept without an answer
	Time   time.Time `json:"time"`
	// Wake, for a system message (a plugin's push), makes it wait for a
	// turn as a user message does: the next turn claims and answers it.
	// Other system messages are never claimed.
	Wake bool `json:"wake,omitempty"`
}

// Turn statuses.
const (
	TurnRunning     = "running"
	TurnDone        = "done"
	TurnFailed      = "failed"      // the model or the host failed; Error says why
	TurnInterrupted = "interrupted" // the host stopped (shutdown, reset, crash)
)

// Turn is one answer of the assistant to the user messages it claimed.
type Turn struct {
	ID         int64  `json:"id"`
	ChatKey    string `json:"chat_key"`
	Status     string `json:"status"`
	Error      string `json:"error,omitempty"`
	Iterations int    `json:"iterations"`     // sandbox runs
	Requests   int    `json:"model_requests"` // model requests
	ModelUS    int64  `json:"model_us"`       // time spent waiting for the model, µs
	// ModelGroup is the model group that answered the turn's last model
	// request ("" when none answered): another than the default one when
	// the default failed and its fallback answered.
	ModelGroup string    `json:"model_group,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// Context says how the turn's prompt fit the model's window; nil for
	// turns before windows were kept.
	Context *PromptContext `json:"context,omitempty"`
}

// PromptContext is how a turn's first prompt fit the model's context
// window, for the run log: the window it was built for, its estimated
// tokens, and what of the history was summarized or left out.
type PromptContext struct {
	// Group is the model group whose window the prompt was built for
	// (the smallest along the default group's fallbacks).
	Group string `json:"group,omitempty"`
	// Window and Reserve are that group's window and the tokens kept
	// free for the answer, so the prompt may take Window - Reserve.
	Window  int `json:"window"`
	Reserve int `json:"reserve"`
	// Tokens is the prompt's estimated size (llm.EstimatePrompt); Fixed
	// that of its parts besides the history (system prompt, persona,
	// method docs, plugins' injected context, the messages it answers).
	Tokens int `json:"tokens"`
	Fixed  int `json:"fixed"`
	// Shown is how many history messages the prompt shows as they are.
	Shown int `json:"shown"`
	// Summary is set when the prompt holds a summary of older messages:
	// SummaryThrough is the newest message id it covers, SummaryCovered
	// how many messages it covers in all, SummaryTokens its size.
	Summary        bool  `json:"summary,omitempty"`
	SummaryThrough int64 `json:"summary_through,omitempty"`
	SummaryCovered int   `json:"summary_covered,omitempty"`
	SummaryTokens  int   `json:"summary_tokens,omitempty"`
	// Summarized is how many messages this turn summarized before its
	// prompt (the summary was not ready); 0 when it used a kept one.
	Summarized int `json:"summarized,omitempty"`
	// Omitted is how many older messages the prompt leaves out with no
	// summary covering them; Note says why.
	Omitted int    `json:"omitted,omitempty"`
	Note    string `json:"note,omitempty"`
}

// HistorySummary is what the model wrote of a chat's older messages, kept
// so later turns show it in their place.
type HistorySummary struct {
	ChatKey string `json:"chat_key"`
	// ThroughID is the newest message the summary covers: the prompt
	// shows it in place of every message up to this id.
	ThroughID int64 `json:"through_id"`
	// Covered is how many messages it covers in all, earlier summaries
	// included.
	Covered int    `json:"covered"`
	Text    string `json:"text"`
	// Tokens is the text's estimated size.
	Tokens int `json:"tokens"`
	// Group is the model group that wrote it.
	Group     string    `json:"model_group"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Run is the execution record of one sandbox run.
type Run struct {
	RunID       string          `json:"run_id"`
	ChatKey     string          `json:"chat_key"`
	TurnID      int64           `json:"turn_id,omitempty"` // 0 for playground runs
	Iteration   int             `json:"iteration"`         // 1-based within the turn
	Code        string          `json:"code"`
	Output      string          `json:"output"`
	StopType    string          `json:"stop_type"`
	ExitCode    int             `json:"exit_code"`
	DurationMS  int64           `json:"duration_ms"`
	Calls       json.RawMessage `json:"calls"` // the RPC calls made, as `nekro exec --json` lists them
	Note        string          `json:"note,omitempty"`
	AgentMethod string          `json:"agent_method,omitempty"`
	AgentResult json.RawMessage `json:"agent_result,omitempty"`
	Time        time.Time       `json:"time"`
	// ModelGroup is the model group whose reply the run ran ("" for
	// playground runs).
	ModelGroup string `json:"model_group,omitempty"`
	// Context is how its turn's prompt fit the model's window (nil for
	// playground runs and runs before windows were kept).
	Context *PromptContext `json:"context,omitempty"`
}

// NoTurn is the TurnID of a user message stored without starting a turn
// (a plugin's message hook said BlockTrigger): it shows in the history and
// is never claimed.
const NoTurn int64 = -1
