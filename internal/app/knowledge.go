package app

import (
	"context"
	"fmt"

	"github.com/nekro-go/nekro/internal/knowledge"
	"github.com/nekro-go/nekro/internal/llm"
	"github.com/nekro-go/nekro/internal/vector"
	"github.com/nekro-go/nekro/plugin"
)

// openKnowledge opens the vector store and the knowledge base on a's
// database. Their embeddings come from the model groups' embedding group,
// asked anew for every import and search, so an edit of the group applies
// at once.
func (a *App) openKnowledge(ctx context.Context) error {
	vs, err := a.vectorStore(ctx)
	if err != nil {
		return err
	}
	ms := a.Models
	kb, err := knowledge.Open(ctx, a.DB, knowledge.Options{Vectors: vs, Log: a.log,
		Embedder: func(ctx context.Context) (knowledge.Embedder, error) {
			return ms.Embeddings(ctx, llm.EmbeddingOptions{})
		}})
	if err != nil {
		return err
	}
	a.Knowledge = kb
	a.closers = append(a.closers, func(context.Context) error { return kb.Close() })
	return nil
}

// vectorStore opens the vector store on a.DB once, for the knowledge
// base and the memory both (one in-memory copy of each scope).
func (a *App) vectorStore(ctx context.Context) (*vector.DBStore, error) {
	if a.Vectors != nil {
		return a.Vectors, nil
	}
	vs, err := vector.Open(ctx, a.DB)
	if err != nil {
		return nil, err
	}
	a.Vectors = vs
	a.closers = append(a.closers, func(context.Context) error { return vs.Close() })
	return vs, nil
}

// searchKnowledge is the runtime's Config.Knowledge: a run's
// Ctx.SearchKnowledge, as its chat.
func (a *App) searchKnowledge(ctx context.Context, chatKey, query string, topK int) ([]plugin.KnowledgePassage, error) {
	if a.Knowledge == nil {
		return nil, plugin.ErrNoService
	}
	ps, err := a.Knowledge.SearchChat(ctx, chatKey, query, topK)
	if err != nil {
		return nil, err
	}
	out := make([]plugin.KnowledgePassage, len(ps))
	for i, p := range ps {
		out[i] = plugin.KnowledgePassage{Source: p.Source, Scope: p.Scope, Text: p.Text, Score: p.Score}
	}
	return out, nil
}

// eraseChatKnowledge removes a chat's knowledge base scope (the agent's
// OnReset: a reset chat keeps no documents).
func (a *App) eraseChatKnowledge(ctx context.Context, chatKey string) error {
	if a.Knowledge == nil {
		return nil
	}
	n, err := a.Knowledge.DeleteScope(ctx, knowledge.ChatScope(chatKey))
	if err != nil {
		return fmt.Errorf("erase the chat's knowledge base: %w", err)
	}
	if n > 0 {
		a.log.Info("chat reset: its knowledge base documents erased", "chat", chatKey, "documents", n)
	}
	return nil
}

// OpenKnowledge opens the database, the model groups (seeded from cfg as
// nekro serve seeds them) and the knowledge base, and nothing else: what
// `nekro knowledge` needs. A running server sees its changes on its next
// search.
func OpenKnowledge(ctx context.Context, cfg Config) (_ *App, err error) {
	cfg.defaults()
	a := &App{log: cfg.Log}
	defer func() {
		if err != nil {
			a.Close(context.WithoutCancel(ctx))
		}
	}()
	if err := a.openStore(ctx, cfg); err != nil {
		return nil, err
	}
	if err := a.openModels(ctx, cfg, nil); err != nil {
		return nil, err
	}
	if err := a.openKnowledge(ctx); err != nil {
		return nil, err
	}
	return a, nil
}
