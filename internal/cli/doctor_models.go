package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/nekro-go/nekro/internal/llm"
)

// probeTimeout bounds one model group's test request.
const probeTimeout = 30 * time.Second

// doctorModels sends each configured model group (chat, then the others
// by name) a request for one token and prints what it answered, or its
// error without the key; it fails when a group did not answer. With no
// model configured it says so and passes.
func (g *globals) doctorModels(ctx context.Context, out io.Writer) error {
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
