package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/nekro-go/nekro/internal/llm"
	"github.com/nekro-go/nekro/internal/models"
)

// probeTimeout bounds one model group's test request.
const probeTimeout = 30 * time.Second

// doctorModels sends each model group (the default one, then the others
// by name) a request for one token and prints what it answered, or its
// error without the key; it fails when a group did not answer. The groups
// are the database's once the operator edited them (web UI, API: what
// turns use), else the environment's and the config file's. With no
// model configured it says so and passes.
func (g *globals) doctorModels(ctx context.Context, out io.Writer, store *models.Store) error {
	if store != nil {
		set, err := store.Get(ctx)
		if err != nil {
			return fmt.Errorf("model groups: %w", err)
		}
		if set.Source == models.SourceAPI {
			return doctorStoredModels(ctx, out, store, set)
		}
	}
	chat, groups := g.models()
	type group struct {
		name string
		cfg  llm.Config
	}
	var all []group
	if chat.BaseURL != "" || chat.Model != "" {
		all = append(all, group{"chat", chat})
	}
	names := make([]string, 0, len(groups))
	for n := range groups {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		all = append(all, group{n, groups[n]})
	}
	if len(all) == 0 {
		fmt.Fprintf(out, "skip models: none configured (%s and %s, or llm-base-url and llm-model in the config file)\n", llm.EnvBaseURL, llm.EnvModel)
		return nil
	}
	var failed []string
	for _, gr := range all {
		probe := probeModel
		if gr.name == llm.GroupEmbedding {
			probe = probeEmbeddings
		}
		detail, err := probe(ctx, gr.cfg)
		if err != nil {
			msg := err.Error()
			if k := gr.cfg.APIKey; len(k) >= 4 {
				msg = strings.ReplaceAll(msg, k, "(the key)")
			}
			fmt.Fprintf(out, "fail model group %s: %s\n", gr.name, msg)
			failed = append(failed, gr.name)
			continue
		}
		fmt.Fprintf(out, "ok   model group %s: %s\n", gr.name, detail)
	}
	if len(failed) > 0 {
		return fmt.Errorf("model groups that did not answer: %s", strings.Join(failed, ", "))
	}
	return nil
}

// probeModel sends cfg's endpoint a one-token request and describes the
// answer.
func probeModel(ctx context.Context, cfg llm.Config) (string, error) {
	c, err := llm.NewClient(cfg)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	comp, err := c.Probe(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s at %s answered %q in %d ms", cfg.Model, redactURL(cfg.BaseURL), comp.Text, comp.Duration.Milliseconds()), nil
}

// probeEmbeddings sends the embedding group's endpoint one short text and
// describes the vector: an embeddings model answers no chat request.
func probeEmbeddings(ctx context.Context, cfg llm.Config) (string, error) {
	e, err := llm.NewEmbeddings(cfg, llm.EmbeddingOptions{})
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	dims, took, err := e.Probe(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s at %s embeds in %d dimensions (%d ms)", cfg.Model, redactURL(cfg.BaseURL), dims, took.Milliseconds()), nil
}

// doctorStoredModels tests the groups stored in the database, with their
// stored keys, as the web UI's Test button does.
func doctorStoredModels(ctx context.Context, out io.Writer, store *models.Store, set models.Settings) error {
	if len(set.Groups) == 0 {
		fmt.Fprintln(out, "skip models: the database keeps no model group (add one in the web UI's Models page or PUT /api/models)")
		return nil
	}
	groups := slices.Clone(set.Groups)
	slices.SortStableFunc(groups, func(a, b models.Group) int {
		switch {
		case a.Name == set.Default:
			return -1
		case b.Name == set.Default:
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	var failed []string
	for _, gr := range groups {
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		start := time.Now()
		answer, err := store.Test(pctx, gr)
		took := time.Since(start)
		cancel()
		if err != nil {
			fmt.Fprintf(out, "fail model group %s (database): %v\n", gr.Name, err)
			failed = append(failed, gr.Name)
			continue
		}
		fmt.Fprintf(out, "ok   model group %s (database): %s at %s answered %q in %d ms\n", gr.Name, gr.Model, redactURL(gr.BaseURL),
			answer, took.Milliseconds())
	}
	if len(failed) > 0 {
		return fmt.Errorf("model groups that did not answer: %s", strings.Join(failed, ", "))
	}
	return nil
}
