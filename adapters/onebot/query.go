package onebot

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/nekro-go/nekro/adapter"
)

// queryScope says what chat a read-only action may be asked from and
// which of its parameters name the chat's group or a user.
type queryScope int

const (
	anyChat     queryScope = iota // about the bot itself: no group, no user
	groupOnly                     // group_id, the chat's group
	groupMember                   // group_id, the chat's group, and user_id, anyone of it
	userOfChat                    // user_id: the private chat's user, or a member of the chat's group
)

// queryAction is one action on the read-only allow list.
type queryAction struct {
	scope  queryScope
	params []string // the parameters it takes, beyond group_id and user_id
}

// queries is the allow list: the OneBot v11 actions (api/public.md) that
// read and neither send, change nor administer anything. get_friend_list
// is left out: the bot's friends are not one chat's.
var queries = map[string]queryAction{
	"get_login_info":        {scope: anyChat},
	"get_status":            {scope: anyChat},
	"get_version_info":      {scope: anyChat},
	"get_group_info":        {scope: groupOnly, params: []string{"no_cache"}},
	"get_group_member_list": {scope: groupOnly, params: []string{"no_cache"}},
	"get_group_honor_info":  {scope: groupOnly, params: []string{"type"}},
	"get_group_member_info": {scope: groupMember, params: []string{"no_cache"}},
	"get_stranger_info":     {scope: userOfChat, params: []string{"no_cache"}},
}

// QueryActions returns the actions Query answers, sorted.
func QueryActions() []string {
	out := make([]string, 0, len(queries))
	for a := range queries {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// Query answers a read-only action for q.ChatKey, through the connection
// that serves that chat, as the implementation answers it (the action's
// data). Only the actions of QueryActions are asked; group_id must be the
// chat's group (it is filled in when left out), and a user the chat's
// private user or, in a group, one of its members (asked of the
// implementation first). Anything else wraps adapter.ErrQueryRefused.
func (a *Adapter) Query(ctx context.Context, q adapter.Query) (json.RawMessage, error) {
	kind, target, err := chatOf(q.ChatKey)
	if err != nil {
		return nil, err
	}
	act, ok := queries[q.Action]
	if !ok {
		return nil, fmt.Errorf("OneBot %s: %w: only the read-only actions %s are answered for plugins",
			q.Action, adapter.ErrQueryRefused, strings.Join(QueryActions(), ", "))
	}
	var in map[string]json.RawMessage
	if len(q.Params) > 0 && string(q.Params) != "null" {
		if err := json.Unmarshal(q.Params, &in); err != nil {
			return nil, fmt.Errorf("OneBot %s: the parameters are not a JSON object: %w", q.Action, err)
		}
	}
	out := map[string]any{}
	for k, v := range in {
		switch {
		case k == "group_id" || k == "user_id":
		case slices.Contains(act.params, k):
			out[k] = v
		default:
			return nil, fmt.Errorf("OneBot %s: %w: unknown parameter %q", q.Action, adapter.ErrQueryRefused, k)
		}
	}
	groupID, err := idParam(in, "group_id")
	if err != nil {
		return nil, fmt.Errorf("OneBot %s: %w", q.Action, err)
	}
	userID, err := idParam(in, "user_id")
	if err != nil {
		return nil, fmt.Errorf("OneBot %s: %w", q.Action, err)
	}
	refuse := func(why string, args ...any) error {
		return fmt.Errorf("OneBot %s: %w: %s", q.Action, adapter.ErrQueryRefused, fmt.Sprintf(why, args...))
	}
	if act.scope == anyChat && (groupID != "" || userID != "") {
		return nil, refuse("it takes no group_id or user_id")
	}
	if act.scope == groupOnly && userID != "" {
		return nil, refuse("it takes no user_id")
	}
	if act.scope == userOfChat && groupID != "" {
		return nil, refuse("it takes no group_id")
	}
	if act.scope == groupOnly || act.scope == groupMember {
		if kind != "group" {
			return nil, refuse("chat %s is not a group", q.ChatKey)
		}
		if groupID == "" {
			groupID = target
		}
		if groupID != target {
			return nil, refuse("group %s is not the chat's group (%s): a plugin asks only about its run's chat", groupID, target)
		}
		out["group_id"] = number(groupID)
	}
	if act.scope == groupMember || act.scope == userOfChat {
		if userID == "" {
			return nil, refuse("user_id is required")
		}
		out["user_id"] = number(userID)
	}
	c := a.connFor(q.ChatKey)
	if c == nil {
		return nil, fmt.Errorf("chat %s: %w", q.ChatKey, errNoConnection)
	}
	if act.scope == userOfChat {
		switch {
		case kind == "private" && userID != target:
			return nil, refuse("user %s is not the private chat's user (%s): a plugin asks only about its run's chat", userID, target)
		case kind == "group":
			// Only a member of the chat's group: the implementation says.
			if _, err := c.call(ctx, "get_group_member_info", map[string]any{"group_id": number(target), "user_id": number(userID)}); err != nil {
				return nil, refuse("user %s is not a member of the chat's group %s (%v)", userID, target, err)
			}
		}
	}
	return c.call(ctx, q.Action, out)
}

// chatOf returns the kind ("group" or "private") and id of a OneBot chat.
func chatOf(chatKey string) (kind, target string, err error) {
	platform, channel, ok := adapter.SplitChatKey(chatKey)
	if !ok || platform != Platform {
		return "", "", fmt.Errorf("chat %s is not a OneBot v11 chat", chatKey)
	}
	kind, target, ok = strings.Cut(channel, "_")
	if !ok || (kind != "group" && kind != "private") || target == "" {
		return "", "", fmt.Errorf("chat %s: want onebot_v11-group_<id> or onebot_v11-private_<id>", chatKey)
	}
	return kind, target, nil
}

// idParam reads a group or user id given as a number or a string of
// digits, "" when absent.
func idParam(in map[string]json.RawMessage, name string) (string, error) {
	raw, ok := in[name]
	if !ok || string(raw) == "null" {
		return "", nil
	}
	var v id
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", fmt.Errorf("%s %s is not an id: %w", name, raw, err)
	}
	s := strings.TrimSpace(string(v))
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return "", fmt.Errorf("%s %q is not a number", name, s)
	}
	return s, nil
}
