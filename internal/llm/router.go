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
