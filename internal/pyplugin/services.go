package pyplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/nekro-go/nekro/adapter"
	"github.com/nekro-go/nekro/internal/chat"

	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/plugin"
)

// storeArgs are the arguments of plugin.store's calls, as the documents
// name them.
type storeArgs struct {
	ChatKey  string `json:"chat_key"`
	UserKey  string `json:"user_key"`
	StoreKey string `json:"store_key"`
	Value    string `json:"value"`
}

// serve runs one request of the plugin's: the store (plugin-wide
// namespace, as the reference's plugin.store) and messages (to the chat
// of the call that makes them).
func (h *host) serve(m message) (any, error) {
	h.mu.Lock()
	ctx := h.calls[m.Call]
	h.mu.Unlock()
	switch m.Op {
	case "store.get", "store.set", "store.delete":
		var a storeArgs
		if err := json.Unmarshal(m.Args, &a); err != nil {
			return nil, fmt.Errorf("%s: bad arguments: %w", m.Op, err)
		}
		st := h.plugin.Store()
		c := serviceContext(ctx)
		switch m.Op {
		case "store.get":
			v, ok, err := st.Get(c, pluginhost.ScopeOf(a.ChatKey, a.UserKey), a.StoreKey)
			if err != nil || !ok {
				return nil, err
			}
			return v, nil
		case "store.set":
			r, err := st.Set(c, pluginhost.ScopeOf(a.ChatKey, a.UserKey), a.StoreKey, a.Value)
			return int(r), err
		default:
			r, err := st.Delete(c, pluginhost.ScopeOf(a.ChatKey, a.UserKey), a.StoreKey)
			return int(r), err
		}
	case "message.send":
		var a struct {
			Kind    string `json:"kind"`
			ChatKey string `json:"chat_key"`
			Value   string `json:"value"`
		}
		if err := json.Unmarshal(m.Args, &a); err != nil {
			return nil, fmt.Errorf("%s: bad arguments: %w", m.Op, err)
		}
		if ctx == nil {
			return nil, fmt.Errorf("messages can be sent only while a sandbox method runs (from its _ctx)")
		}
		if a.ChatKey != ctx.ChatKey() {
			return nil, fmt.Errorf("a method can send only to the chat of its run (%s), not to %s", ctx.ChatKey(), a.ChatKey)
		}
		switch a.Kind {
		case "text":
			return nil, ctx.SendText(a.Value)
		case "image":
			return nil, ctx.SendImage(a.Value)
		case "file":
			return nil, ctx.SendFile(a.Value)
		}
		return nil, fmt.Errorf("unknown message kind %q", a.Kind)
	case "message.push_system":
		var a struct {
			ChatKey string `json:"chat_key"`
			Text    string `json:"text"`
			Trigger bool   `json:"trigger"`
		}
		if err := json.Unmarshal(m.Args, &a); err != nil {
			return nil, fmt.Errorf("%s: bad arguments: %w", m.Op, err)
		}
		if ctx == nil { // from a hook, a timer, a task: any chat, as Plugin.PushSystem
			return nil, h.plugin.PushSystem(context.Background(), a.ChatKey, a.Text, a.Trigger)
		}
		if a.ChatKey != ctx.ChatKey() {
			return nil, fmt.Errorf("a method can push only into the chat of its run (%s), not into %s", ctx.ChatKey(), a.ChatKey)
		}
		return nil, ctx.PushSystem(a.Text, a.Trigger)
	case "timer.set", "timer.clear", "timer.list":
		return h.serveTimer(ctx, m.Op, m.Args)
	case "chat.messages":
		// DBChatMessage: the stored messages of the call's own chat,
		// never another's (the chat is the call's, not an argument).
		var a struct {
			Limit int `json:"limit"`
		}
		if err := json.Unmarshal(m.Args, &a); err != nil {
			return nil, fmt.Errorf("%s: bad arguments: %w", m.Op, err)
		}
		if ctx == nil { // a turn hook reads its chat's
			h.mu.Lock()
			ctx = h.readers[m.Call]
			h.mu.Unlock()
		}
		if ctx == nil {
			return nil, fmt.Errorf("a chat's messages can be read only while a sandbox method, a command or a turn hook runs (from its chat)")
		}
		return h.chatMessages(ctx, a.Limit)
	case "adapter.query":
		// OneBot's get_bot and the adapter's self info: a read-only
		// question about the call's own chat (the chat is the call's,
		// not an argument), which the platform's adapter scopes.
		var a struct {
			Action string          `json:"action"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(m.Args, &a); err != nil {
			return nil, fmt.Errorf("%s: bad arguments: %w", m.Op, err)
		}
		if ctx == nil {
			return nil, fmt.Errorf("the chat platform can be asked only while a sandbox method or a command runs (for its chat)")
		}
		var f *QueryFunc
		if h.queries != nil {
			f = h.queries.f.Load()
		}
		if f == nil {
			return nil, fmt.Errorf("no chat platform adapter runs in this nekro command (only nekro serve runs them)")
		}
		return (*f)(ctx, adapter.Query{ChatKey: ctx.ChatKey(), Action: a.Action, Params: a.Params})
	case "knowledge.documents", "knowledge.chunks", "knowledge.search", "memory.search", "memory.get":
		if ctx == nil { // a turn hook reads its chat's
			h.mu.Lock()
			ctx = h.readers[m.Call]
			h.mu.Unlock()
		}
		return h.serveStores(ctx, m.Op, m.Args)
	case "config.get":
		raw, version := pluginhost.ConfigJSON(h.plugin)
		if raw == nil {
			return nil, fmt.Errorf("the plugin's settings are not available (see nekro's log)")
		}
		return configAnswer{raw, version}, nil
	case "config.set":
		var a struct {
			Values map[string]any `json:"values"`
		}
		if err := json.Unmarshal(m.Args, &a); err != nil {
			return nil, fmt.Errorf("%s: bad arguments: %w", m.Op, err)
		}
		if err := pluginhost.SetConfig(h.plugin, a.Values); err != nil {
			return nil, err
		}
		raw, version := pluginhost.ConfigJSON(h.plugin)
		return configAnswer{raw, version}, nil
	case "model.ask":
		// The reference's chat-completion helpers, answered by one of
		// the operator's model groups: the plugin never holds a key.
		var a struct {
			Group string               `json:"group"`
			Parts []plugin.ContentPart `json:"parts"`
		}
		if err := json.Unmarshal(m.Args, &a); err != nil {
			return nil, fmt.Errorf("%s: bad arguments: %w", m.Op, err)
		}
		if ctx == nil {
			return nil, fmt.Errorf("a model can be asked only while a sandbox method runs (from its _ctx)")
		}
		return ctx.AskModel(a.Group, a.Parts...)
	case "fs.mixed_forward_file":
		var a struct {
			URL      *string `json:"url"`
			Bytes    []byte  `json:"bytes"` // base64 in JSON
			Path     *string `json:"path"`
			FileName string  `json:"file_name"`
		}
		if err := json.Unmarshal(m.Args, &a); err != nil {
			return nil, fmt.Errorf("%s: bad arguments: %w", m.Op, err)
		}
		if ctx == nil {
			return nil, fmt.Errorf("files reach the sandbox only while a sandbox method runs (from its _ctx)")
		}
		var src any
		switch {
		case a.URL != nil:
			src = *a.URL
		case a.Path != nil:
			src = *a.Path
		case a.Bytes != nil:
			src = a.Bytes
		default:
			return nil, fmt.Errorf("mixed_forward_file: nothing to forward")
		}
		return ctx.FS().MixedForwardFile(ctx, src, a.FileName)
	}
	return nil, fmt.Errorf("unknown request %q", m.Op)
}

// configAnswer is the settings in force and their version.
type configAnswer struct {
	Values  json.RawMessage `json:"values"`
	Version uint64          `json:"version"`
}

// serviceContext is the context a request runs under: its call's (ended
// with the call) or, from a hook, one that does not end.
func serviceContext(ctx *plugin.Ctx) context.Context {
	if ctx != nil {
		return ctx
	}
	return context.Background()
}

// QueryFunc asks the adapter of q.ChatKey's platform a read-only
// question for that chat (adapterhost.Set.Query).
type QueryFunc func(ctx context.Context, q adapter.Query) (json.RawMessage, error)

// querySource is the Set's QueryFunc, shared by its hosts; nil where no
// adapter runs.
type querySource struct{ f atomic.Pointer[QueryFunc] }

// UseQueries lets the plugins' OneBot get_bot and adapter self info ask
// the running chat platform adapters, for the chat of the call they run
// in.
func (s *Set) UseQueries(f QueryFunc) { s.queries.f.Store(&f) }

// HistoryFunc returns a chat's latest messages, oldest first, at most
// last of them (chat.Service.History).
type HistoryFunc func(ctx context.Context, chatKey string, last int) ([]chat.Message, error)

// historySource is the Set's HistoryFunc, shared by its hosts; nil until
// the chats are open (Set.UseHistory).
type historySource struct{ f atomic.Pointer[HistoryFunc] }

// UseHistory lets the plugins' DBChatMessage queries read the stored
// messages of the chat of the call they run in.
func (s *Set) UseHistory(f HistoryFunc) { s.history.f.Store(&f) }

// maxMessageRows bounds what one DBChatMessage query reads.
const maxMessageRows = 1000

// chatRow is a stored message as the process's DBChatMessage reads it.
type chatRow struct {
	ID         int64  `json:"id"`
	Role       string `json:"role"`
	SenderID   string `json:"sender_id"`
	SenderName string `json:"sender_name"`
	Text       string `json:"text"`
	Time       int64  `json:"time"` // Unix seconds, the reference's send_timestamp
}

// chatMessages answers a DBChatMessage query of the call ctx: the latest
// limit messages of its chat.
func (h *host) chatMessages(ctx *plugin.Ctx, limit int) ([]chatRow, error) {
	var f *HistoryFunc
	if h.history != nil {
		f = h.history.f.Load()
	}
	if f == nil {
		return nil, fmt.Errorf("DBChatMessage: this nekro command keeps no chat history (only nekro serve and nekro exec with a database do)")
	}
	if limit <= 0 || limit > maxMessageRows {
		limit = maxMessageRows
	}
	ms, err := (*f)(ctx, ctx.ChatKey(), limit)
	if err != nil {
		return nil, fmt.Errorf("DBChatMessage: %w", err)
	}
	rows := make([]chatRow, len(ms))
	for i, m := range ms {
		rows[i] = chatRow{ID: m.ID, Role: string(m.Role), SenderID: m.SenderID, SenderName: m.SenderName, Text: m.Text,
			Time: m.Time.Unix()}
	}
	return rows, nil
}
