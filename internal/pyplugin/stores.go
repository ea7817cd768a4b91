package pyplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/nekro-go/nekro/internal/knowledge"
	"github.com/nekro-go/nekro/internal/memory"
	"github.com/nekro-go/nekro/plugin"
)

// KnowledgeBase is the knowledge base the reference's kb services of a
// Python plugin read (knowledge.Store), always for the chat of the call
// they run in: its own documents and the global ones.
type KnowledgeBase interface {
	SearchChat(ctx context.Context, chatKey, text string, topK int) ([]knowledge.Passage, error)
	List(ctx context.Context, scope string) ([]knowledge.Document, error)
	Get(ctx context.Context, id string) (knowledge.Document, error)
	Chunks(ctx context.Context, id string) ([]knowledge.StoredChunk, error)
}

// Memories is the long-term memory the reference's memory query service
// of a Python plugin reads (memory.Service), always the memories learned
// in the chat of the call it runs in.
type Memories interface {
	Search(ctx context.Context, chatKey, text string, n int) ([]memory.Memory, error)
	Get(ctx context.Context, chatKey string, id int64) (memory.Memory, error)
}

// storeSource holds what UseKnowledge and UseMemories gave, shared by the
// Set's hosts; nil parts where this nekro command opened none.
type storeSource struct {
	kb  atomic.Pointer[KnowledgeBase]
	mem atomic.Pointer[Memories]
}

// UseKnowledge lets the plugins' kb services (kb_tools) read the
// knowledge base, for the chat of the call they run in.
func (s *Set) UseKnowledge(k KnowledgeBase) { s.stores.kb.Store(&k) }

// UseMemories lets the plugins' memory query service (memory_tools) read
// the memories learned in the chat of the call it runs in.
func (s *Set) UseMemories(m Memories) { s.stores.mem.Store(&m) }

// kbDocument is a knowledge document as the process's DBKBDocument reads
// it.
type kbDocument struct {
	ID      string `json:"id"`
	Scope   string `json:"scope"`
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	Status  string `json:"status"`
	Chunks  int    `json:"chunks"`
	Error   string `json:"error,omitempty"`
	Created int64  `json:"created"` // Unix seconds
	Updated int64  `json:"updated"`
}

func docView(d knowledge.Document) kbDocument {
	return kbDocument{ID: d.ID, Scope: d.Scope, Name: d.Name, Size: d.Size, Status: d.Status, Chunks: d.Chunks,
		Error: d.Error, Created: d.Created.Unix(), Updated: d.Updated.Unix()}
}

// serveStores answers the knowledge and memory requests of the call ctx:
// the chat is the call's, never an argument.
func (h *host) serveStores(ctx *plugin.Ctx, op string, raw json.RawMessage) (any, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%s: the knowledge base and the memories are read only while a sandbox method or a command runs (for its chat)", op)
	}
	chatKey := ctx.ChatKey()
	switch op {
	case "knowledge.documents", "knowledge.chunks", "knowledge.search":
		var kb KnowledgeBase
		if h.stores != nil {
			if p := h.stores.kb.Load(); p != nil {
				kb = *p
			}
		}
		if kb == nil {
			return nil, errors.New("this nekro command opens no knowledge base (nekro serve and nekro exec do)")
		}
		return serveKnowledge(ctx, kb, chatKey, op, raw)
	case "memory.search", "memory.get":
		var mem Memories
		if h.stores != nil {
			if p := h.stores.mem.Load(); p != nil {
				mem = *p
			}
		}
		if mem == nil {
			return nil, errors.New("this nekro command opens no long-term memory (nekro serve and nekro exec do)")
		}
		return serveMemory(ctx, mem, chatKey, op, raw)
	}
	return nil, fmt.Errorf("unknown request %q", op)
}

func serveKnowledge(ctx context.Context, kb KnowledgeBase, chatKey, op string, raw json.RawMessage) (any, error) {
	var a struct {
		ID    string `json:"id"`
		Query string `json:"query"`
		TopK  int    `json:"top_k"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("%s: bad arguments: %w", op, err)
	}
	switch op {
	case "knowledge.documents":
		out := []kbDocument{}
		for _, scope := range []string{knowledge.ChatScope(chatKey), "global"} {
			ds, err := kb.List(ctx, scope)
			if err != nil {
				return nil, err
			}
			for _, d := range ds {
				out = append(out, docView(d))
			}
		}
		return out, nil
	case "knowledge.chunks":
		d, err := kb.Get(ctx, a.ID)
		if err != nil || (d.Scope != "global" && d.Scope != knowledge.ChatScope(chatKey)) {
			// Another chat's document is as missing as one that never was.
			return nil, fmt.Errorf("knowledge: no document %s in this chat's knowledge base", a.ID)
		}
		cs, err := kb.Chunks(ctx, a.ID)
		if err != nil {
			return nil, err
		}
		return struct {
			Document kbDocument              `json:"document"`
			Chunks   []knowledge.StoredChunk `json:"chunks"`
		}{docView(d), cs}, nil
	default:
		if a.TopK <= 0 || a.TopK > knowledge.MaxTopK {
			a.TopK = knowledge.MaxTopK
		}
		return kb.SearchChat(ctx, chatKey, a.Query, a.TopK)
	}
}

func serveMemory(ctx context.Context, mem Memories, chatKey, op string, raw json.RawMessage) (any, error) {
	var a struct {
		ID    int64  `json:"id"`
		Query string `json:"query"`
		Limit int    `json:"limit"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("%s: bad arguments: %w", op, err)
	}
	if op == "memory.get" {
		m, err := mem.Get(ctx, chatKey, a.ID)
		if errors.Is(err, memory.ErrNotFound) {
			return nil, nil // the process answers "not found"
		}
		return m, err
	}
	if a.Limit <= 0 || a.Limit > 50 {
		a.Limit = 50
	}
	return mem.Search(ctx, chatKey, a.Query, a.Limit)
}
