package llm

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// DefaultGroup is the name of the turns' model group.
const DefaultGroup = "chat"

// Router sends requests to model groups: the operator's named models
// (DefaultGroup for turns, "vision", ...), each of which may fall back to
// another when it fails after its retries.
type Router interface {
	// Route sends msgs to group ("" is the default group) and, when it
	// fails, to the groups it falls back to, in order; the Completion's
	// Group says which answered. The error of a request that no group
	// answered names every group tried.
	Route(ctx context.Context, group string, msgs []ChatMessage) (Completion, error)
	// Ready returns nil when the default group can answer, else why not
	// and how to configure it.
	Ready(ctx context.Context) error
}

// Static is a Router over fixed models with no fallbacks: Default answers
// the default group, Groups the others by name.
type Static struct {
	Default Model // nil: None{ErrNoModel}
	Groups  map[string]Model
}

// Route sends msgs to the model of group.
func (s Static) Route(ctx context.Context, group string, msgs []ChatMessage) (Completion, error) {
	m := s.Default
	if group != "" && group != DefaultGroup {
		var ok bool
		if m, ok = s.Groups[group]; !ok {
			return Completion{}, UnknownGroup(group)
		}
	}
	if m == nil {
		m = None{Reason: ErrNoModel}
	}
	c, err := m.Complete(ctx, msgs)
	if err == nil {
		c.Group = group
		if c.Group == "" {
			c.Group = DefaultGroup
		}
	}
	return c, err
}

// Ready reports whether Default is a configured model.
func (s Static) Ready(context.Context) error {
	if s.Default == nil {
		return ErrNoModel
	}
	if n, ok := s.Default.(None); ok {
		return n.Reason
	}
	return nil
}

// ErrUnknownGroup is what errors.Is finds in the error of a request to a
// group nobody configured, so a caller can fall back to another group.
var ErrUnknownGroup = errors.New("no such model group")

// UnknownGroup is the error for a request to a group nobody configured;
// it matches ErrUnknownGroup.
func UnknownGroup(group string) error { return unknownGroupError{group} }

type unknownGroupError struct{ group string }

func (e unknownGroupError) Error() string {
	return fmt.Sprintf("no model group %q is configured (set NEKRO_LLM_%s_MODEL)", e.group, strings.ToUpper(e.group))
}

func (e unknownGroupError) Is(target error) bool { return target == ErrUnknownGroup }

var _ Router = Static{}

// DefaultContextWindow is a model group's context window when the
// operator sets none: 32k tokens, what most chat models of the last years
// read at least.
const DefaultContextWindow = 32 << 10

// DefaultAnswerReserve is what is kept free for the answer of a group
// with no max_tokens: 4k tokens, or a quarter of a smaller window.
const DefaultAnswerReserve = 4 << 10

// Window is the room of a model group's context: the prompt may take
// Tokens - Reserve.
type Window struct {
	// Group is the group whose window this is.
	Group string `json:"group"`
	// Tokens is the context window, prompt and answer together.
	Tokens int `json:"tokens"`
	// Reserve is kept free for the answer: the group's max_tokens.
	Reserve int `json:"reserve"`
}

// WindowOf returns the window of a group with window tokens (0: the
// default) and maxTokens for the answer (0: the default reserve). With
// the default window, a max_tokens over half of it reserves half: the
// operator set a large answer for a model whose window they did not say.
func WindowOf(group string, tokens, maxTokens int) Window {
	reserve := maxTokens
	if tokens <= 0 {
		tokens = DefaultContextWindow
		reserve = min(reserve, tokens/2)
	}
	if reserve <= 0 {
		reserve = min(DefaultAnswerReserve, tokens/4)
	}
	return Window{Group: group, Tokens: tokens, Reserve: reserve}
}

// Prompt is how many tokens a prompt may take (never below 0).
func (w Window) Prompt() int { return max(w.Tokens-w.Reserve, 0) }

// Windows is implemented by a Router that knows its groups' windows.
type Windows interface {
	// Window returns the window a request to group ("" is the default
	// group) must fit: of the groups it may fall back to, the one whose
	// prompt room is smallest, so a prompt built for it fits whichever
	// answers.
	Window(ctx context.Context, group string) (Window, error)
}
