package models

import (
	"context"
	"fmt"

	"github.com/nekro-go/nekro/internal/llm"
)

// group returns the named group as requests use it now: the stored
// settings, or this process's environment while the groups are its seed.
func (s *Store) group(ctx context.Context, name string) (Group, bool, error) {
	set, _, ok, bad, err := s.load(ctx)
	if err != nil {
		return Group{}, false, err
	}
	s.mu.Lock()
	if s.seed != nil && (!ok || set.Source == SourceEnv) {
		set, bad = *s.seed, nil
	}
	s.mu.Unlock()
	if err := bad[name]; err != nil {
		return Group{}, false, err
	}
	for _, g := range set.Groups {
		if g.Name == name {
			return g, true, nil
		}
	}
	return Group{}, false, nil
}

// embeddingConfig is g's endpoint with the shared client options.
func (s *Store) embeddingConfig(g Group) llm.Config {
	cfg := s.opts.Client
	cfg.BaseURL, cfg.APIKey, cfg.Model = g.BaseURL, g.APIKey, g.Model
	return cfg
}

// Embeddings returns a client of the embedding group (llm.GroupEmbedding)
// as it is stored now, or llm.ErrNoEmbeddingModel when there is none.
// Ask again for each piece of work: an edit of the group applies to the
// next. The group's fallback is not used: vectors of two models cannot
// be compared.
func (s *Store) Embeddings(ctx context.Context, opts llm.EmbeddingOptions) (*llm.Embeddings, error) {
	g, ok, err := s.group(ctx, llm.GroupEmbedding)
	if err != nil {
		return nil, fmt.Errorf("models: %w", err)
	}
	if !ok {
		return nil, llm.ErrNoEmbeddingModel
	}
	return llm.NewEmbeddings(s.embeddingConfig(g), opts)
}
