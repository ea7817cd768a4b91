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
}

// NoTurn is the TurnID of a user message stored without starting a turn
// (a plugin's message hook said BlockTrigger): it shows in the history and
// is never claimed.
const NoTurn int64 = -1
