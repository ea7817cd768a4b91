// Package history_travel is the built-in history search plugin
// (nekro.history_travel), a port of the reference's 漫游历史记录: the AI
// looks further back in its chat than its prompt shows.
//
//   - find_history_travel(chat_key, keywords) (AGENT) finds the messages
//     that match keywords ("word" any of, "+word" all of, "-word" none
//     of), most relevant first, shown oldest first;
//   - find_history_travel_range(chat_key, base_msg_id, prev_count,
//     next_count) (AGENT) shows the messages around one of them.
//
// Unlike the reference, which read any chat's history from the database
// for whatever chat_key the code passed (so a prompt injection in one chat
// could read another's), both read only the run's own chat, through
// Ctx.History, and a chat_key other than the run's is refused.
package history_travel

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/nekro-go/nekro/plugin"
)

var p = plugin.New(plugin.Meta{
	Name:        "History travel",
	ModuleName:  "history_travel",
	Author:      "nekro",
	Version:     "1.0.0",
	Description: "Search the chat's own older messages by keyword, and read the messages around one.",
})

// Settings are the operator's bounds on what a search returns.
type Settings struct {
	MaxQuerySize      int `json:"max_query_size" title:"漫游记录泛查询数量 (messages per keyword search)" min:"1" max:"50"`
	MaxRangeQuerySize int `json:"max_range_query_size" title:"漫游记录范围查询最大数量 (messages per range query)" min:"2" max:"100"`
	SearchDepth       int `json:"search_depth" title:"How many of the chat's latest messages are searched" description:"the host may cap it lower" min:"10" max:"100000"`
}

var settings = plugin.MountConfig(p, Settings{MaxQuerySize: 8, MaxRangeQuerySize: 16, SearchDepth: 1000})

func init() {
	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Agent, Name: "find_history_travel", Description: "漫游记录泛查询",
		Doc: `Search this chat's history by keywords.

Use short keywords: "word" matches any of them (OR), "+word" must be
present (AND), "-word" must be absent (NOT). Matching ignores case.

Returns:
    str: the matching messages, oldest first, as the history shows them.

Examples:
    find_history_travel(_ck, ["吃饭", "午饭"])    # either word
    find_history_travel(_ck, ["+吃饭", "+午饭"])  # both words
    find_history_travel(_ck, ["晚餐", "-鱼"])     # 晚餐 but not 鱼`,
	}, find)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Agent, Name: "find_history_travel_range", Description: "漫游记录范围查询",
		Doc: `Show the messages around one message of this chat's history (its context, or what a reply refers to).

Returns:
    str: prev_count messages before it, the message, next_count after it.

Example:
    find_history_travel_range(_ck, "42")  # 2 messages before [#42 ...], 10 after`,
	}, findRange)

	plugin.Register(p)
}

// FindArgs are find_history_travel's parameters.
type FindArgs struct {
	ChatKey  string   `json:"chat_key" jsonschema:"the chat's key; always pass _ck (other chats are refused)"`
	Keywords []string `json:"keywords" jsonschema:"short keywords: \"word\" for OR, \"+word\" for AND, \"-word\" for NOT"`
}

// RangeArgs are find_history_travel_range's parameters.
type RangeArgs struct {
	ChatKey   string          `json:"chat_key" jsonschema:"the chat's key; always pass _ck (other chats are refused)"`
	BaseMsgID json.RawMessage `json:"base_msg_id" jsonschema:"the message's id, the number after # in its [#id time] header, e.g. \"42\""`
	PrevCount int             `json:"prev_count,omitempty" default:"2" jsonschema:"messages to show before it (default 2)"`
	NextCount int             `json:"next_count,omitempty" default:"10" jsonschema:"messages to show after it (default 10)"`
}

// ownChat refuses a chat key other than the run's.
func ownChat(ctx *plugin.Ctx, key string) error {
	if key != ctx.ChatKey() {
		return fmt.Errorf("chat_key %q is not this chat: only this chat's own history can be searched, so pass _ck", key)
	}
	return nil
}

// entry is one message of the history as Ctx.History renders it.
type entry struct {
	id     int64
	text   string // the whole entry, as shown
	body   string // its text and attachment lines, lower-cased for matching
	system bool
}

// header matches an entry's "[#id time] who:" header (see Ctx.History);
// names are quoted, so a colon in one does not end the header.
var header = regexp.MustCompile(`^\[#(\d+) [^\]]*\] (you \(assistant\)|SYSTEM|(?:\(no name\)|"(?:[^"\\]|\\.)*") \(user id [^\n]*?\)):`)

func parse(s string) entry {
	e := entry{text: s, body: strings.ToLower(s)}
	if m := header.FindStringSubmatch(s); m != nil {
		e.id, _ = strconv.ParseInt(m[1], 10, 64)
		e.system = m[2] == "SYSTEM"
		e.body = strings.ToLower(strings.TrimSpace(s[len(m[0]):]))
	}
	return e
}

// history reads the run's own chat's searchable messages, oldest first.
func history(ctx *plugin.Ctx) ([]entry, error) {
	raw, err := ctx.History(settings.Get().SearchDepth)
	if err != nil {
		return nil, err
	}
	out := make([]entry, 0, len(raw))
	for _, s := range raw {
		e := parse(s)
		// This plugin's own earlier answers, recorded as system messages,
		// would match their own keywords again: leave them out.
		if e.system && strings.HasPrefix(e.body, "[agent method find_history_travel") {
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

func find(ctx *plugin.Ctx, a FindArgs) (string, error) {
	if err := ownChat(ctx, a.ChatKey); err != nil {
		return "", err
	}
	var or, and, not []string
	for _, k := range a.Keywords {
		switch {
		case strings.HasPrefix(k, "+"):
			and = appendWord(and, k[1:])
		case strings.HasPrefix(k, "-"):
			not = appendWord(not, k[1:])
		default:
			or = appendWord(or, k)
		}
	}
	msgs, err := history(ctx)
	if err != nil {
		return "", err
	}
	type hit struct {
		i     int // position in msgs: later is newer
		score int
	}
	var hits []hit
	for i, m := range msgs {
		score := 0
		for _, k := range or {
			if strings.Contains(m.body, strings.ToLower(k)) {
				score++
			}
		}
		if len(or) > 0 && score == 0 {
			continue
		}
		if !all(and, func(k string) bool { return strings.Contains(m.body, strings.ToLower(k)) }) ||
			slices.ContainsFunc(not, func(k string) bool { return strings.Contains(m.body, strings.ToLower(k)) }) {
			continue
		}
		hits = append(hits, hit{i, score + 2*len(and)})
	}
	if len(hits) == 0 {
		return "[No messages found matching " + describe(or, and, not) + "]", nil
	}
	// The most relevant (most keywords matched), newer first among equals;
	// then shown in the order they were sent.
	slices.SortStableFunc(hits, func(x, y hit) int {
		if x.score != y.score {
			return y.score - x.score
		}
		return y.i - x.i
	})
	hits = hits[:min(len(hits), settings.Get().MaxQuerySize)]
	slices.SortFunc(hits, func(x, y hit) int { return x.i - y.i })
	texts := make([]string, len(hits))
	for j, h := range hits {
		texts[j] = msgs[h.i].text
	}
	return strings.Join(texts, "\n\n") + fmt.Sprintf("\n\n[Query %d messages. You NEED to use the 'find_history_travel_range' method "+
		"to get more context around a specific message. DO NOT GUESS THE EXACT CONTEXT ACCORDING TO THE SIMPLIFIED MESSAGE.]", len(hits)), nil
}

func appendWord(words []string, w string) []string {
	if w = strings.TrimSpace(w); w != "" {
		words = append(words, w)
	}
	return words
}

func all(words []string, ok func(string) bool) bool {
	for _, w := range words {
		if !ok(w) {
			return false
		}
	}
	return true
}

// describe names the query in a "no messages found" answer.
func describe(or, and, not []string) string {
	s := "no keywords"
	if len(or) > 0 {
		s = "OR: " + strings.Join(or, ", ")
	}
	if len(and) > 0 {
		s += ", AND: " + strings.Join(and, ", ")
	}
	if len(not) > 0 {
		s += ", NOT: " + strings.Join(not, ", ")
	}
	return s
}

func findRange(ctx *plugin.Ctx, a RangeArgs) (string, error) {
	if err := ownChat(ctx, a.ChatKey); err != nil {
		return "", err
	}
	id, err := messageID(a.BaseMsgID)
	if err != nil {
		return "", err
	}
	limit := settings.Get().MaxRangeQuerySize
	if a.PrevCount < 0 || a.NextCount < 0 {
		return "", errors.New("prev_count and next_count must not be negative")
	}
	if a.PrevCount+a.NextCount > limit {
		return "", fmt.Errorf("查询范围过大: prev_count + next_count is %d, at most %d", a.PrevCount+a.NextCount, limit)
	}
	msgs, err := history(ctx)
	if err != nil {
		return "", err
	}
	i := slices.IndexFunc(msgs, func(e entry) bool { return e.id == id })
	if i < 0 {
		return "", fmt.Errorf("message #%d is not in this chat's searchable history (its latest %d messages)", id, settings.Get().SearchDepth)
	}
	from, to := max(i-a.PrevCount, 0), min(i+a.NextCount+1, len(msgs))
	texts := make([]string, 0, to-from)
	for _, m := range msgs[from:to] {
		texts = append(texts, m.text)
	}
	out := strings.Join(texts, "\n\n")
	if len(texts) >= limit {
		out += "\n\n[The number of returned messages has reached the query limit. If you need more context, please make another query.]"
	}
	return out, nil
}

// messageID reads a message id given as 42, "42" or "#42".
func messageID(raw json.RawMessage) (int64, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		var n json.Number
		if json.Unmarshal(raw, &n) != nil {
			return 0, fmt.Errorf("base_msg_id must be a message id such as \"42\", got %s", raw)
		}
		s = n.String()
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(s), "#"), 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("base_msg_id must be a message id such as \"42\" (the number in [#42 ...]), got %s", raw)
	}
	return id, nil
}
