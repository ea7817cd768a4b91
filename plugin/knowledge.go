package plugin

import "fmt"

// KnowledgePassage is one passage of the knowledge base a search found.
type KnowledgePassage struct {
	// Source is the document's file name ("archive.zip/entry.md" for a
	// zip's entry).
	Source string `json:"source"`
	// Scope is "global" or "chat:<chat key>": where the document was added.
	Scope string `json:"scope"`
	Text  string `json:"text"`
	// Score ranks the passage: 1 for the first of both the meaning and
	// the keyword ranking, lower further down.
	Score float64 `json:"score"`
}

// SearchKnowledge searches the operator's knowledge base for the run's
// chat: the documents added to this chat and the global ones, never
// another chat's. It returns at most topK passages (1 to 50; 0 means 5),
// best first, found by meaning and by keyword. It works in runs, in the
// per-turn hooks and commands, in background tasks and in MCP calls, as
// their chat; without a knowledge base (or where no chat is bound) it is
// unavailable (ErrNoService).
func (c *Ctx) SearchKnowledge(query string, topK int) ([]KnowledgePassage, error) {
	ps, err := c.env.SearchKnowledge(c, query, topK)
	if err != nil {
		return nil, fmt.Errorf("search the knowledge base: %w", err)
	}
	return ps, nil
}
