package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/knowledge"
)

func init() { subcommands = append(subcommands, newKnowledgeCmd) }

// openKnowledge opens the database, the model groups and the knowledge
// base, nothing else; a running nekro serve sees the change on its next
// search. A data directory without a database is an error (a mistyped
// --data), not a new empty one.
func openKnowledge(ctx context.Context, g *globals) (*knowledge.Store, func(), error) {
	cfg := g.config()
	if cfg.DatabaseURL == "" {
		layout, err := files.NewLayout(cfg.DataDir)
		if err != nil {
			return nil, nil, err
		}
		if _, err := os.Stat(layout.Database()); err != nil {
			return nil, nil, fmt.Errorf("no database at %s (wrong --data? start `nekro serve` once to create it)", layout.Database())
		}
	}
	a, err := app.OpenKnowledge(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return a.Knowledge, func() { a.Close(context.WithoutCancel(ctx)) }, nil
}

func newKnowledgeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "knowledge",
		Short: "Add, list and remove the knowledge base's documents",
		Long: `The knowledge base holds documents the AI searches with
search_knowledge(query, top_k) (plugin nekro.knowledge): plain text,
Markdown, HTML, CSV, PDF, DOCX, and zips of those. Each belongs to one
scope: global (every chat sees it) or chat:<chat key> (that chat only).
Documents are chunked and embedded through the model group "embedding"
(NEKRO_LLM_EMBEDDING_MODEL, or the Models page), so one must be set.
Resetting a chat erases its chat:<key> documents.`,
	}
	var scope string
	var asJSON bool
	add := &cobra.Command{
		Use:   "add FILE...",
		Short: "Add files to the knowledge base, each imported before the next",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kb, done, err := openKnowledge(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer done()
			out := cmd.OutOrStdout()
			for _, path := range args {
				data, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				last := time.Now()
				d, err := kb.Import(cmd.Context(), scope, filepath.Base(path), data, func(d knowledge.Document) {
					if d.Status == knowledge.StatusEmbedding && d.Chunks > 0 && time.Since(last) > time.Second {
						last = time.Now()
						fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d of %d chunks embedded\n", d.Name, d.Done, d.Chunks)
					}
				})
				if err != nil {
					return err
				}
				if asJSON {
					json.NewEncoder(out).Encode(d)
					continue
				}
				fmt.Fprintf(out, "%s\t%s added to %s: %d chunks\n", d.ID, d.Name, d.Scope, d.Chunks)
			}
			return nil
		},
	}
	add.Flags().StringVar(&scope, "scope", "global", "global, or chat:<chat key> for one chat's documents")
	add.Flags().BoolVar(&asJSON, "json", false, "print each document as JSON")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the documents: scope, name, size, chunks, status",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			kb, done, err := openKnowledge(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer done()
			if scope != "" {
				if err := knowledge.CheckScope(scope); err != nil {
					return err
				}
			}
			docs, err := kb.List(cmd.Context(), scope)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"documents": docs})
			}
			if len(docs) == 0 {
				fmt.Fprintln(out, "no documents (add one with `nekro knowledge add FILE --scope global`)")
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSCOPE\tNAME\tBYTES\tCHUNKS\tSTATUS\tADDED")
			for _, d := range docs {
				status := d.Status
				switch {
				case d.Status == knowledge.StatusEmbedding:
					status = fmt.Sprintf("%s %d/%d", d.Status, d.Done, d.Chunks)
				case d.Error != "":
					status += ": " + d.Error
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", d.ID, d.Scope, d.Name, d.Size, d.Chunks, status, d.Created.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
	list.Flags().StringVar(&scope, "scope", "", "only this scope's documents")
	list.Flags().BoolVar(&asJSON, "json", false, `print {"documents": [...]}`)
	rm := &cobra.Command{
		Use:     "rm ID...",
		Aliases: []string{"remove"},
		Short:   "Remove documents, their chunks and their vectors",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kb, done, err := openKnowledge(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer done()
			for _, id := range args {
				d, err := kb.Delete(cmd.Context(), id)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s removed from %s\n", d.ID, d.Name, d.Scope)
			}
			return nil
		},
	}
	var chat string
	var topK int
	search := &cobra.Command{
		Use:   "search QUERY",
		Short: "Search as search_knowledge does in --chat (or the global documents alone)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kb, done, err := openKnowledge(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer done()
			scopes := []string{"global"}
			if chat != "" {
				scopes = append(scopes, knowledge.ChatScope(chat))
			}
			ps, err := kb.Search(cmd.Context(), knowledge.Query{Scopes: scopes, Text: args[0], TopK: topK})
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(map[string]any{"passages": ps})
		},
	}
	search.Flags().StringVar(&chat, "chat", "", "search as this chat: its documents and the global ones")
	search.Flags().IntVar(&topK, "top-k", knowledge.DefaultTopK, "the most passages printed")
	cmd.AddCommand(add, list, rm, search)
	g.addStoreFlags(cmd) // the database and the model groups are all it opens
	return cmd
}
