// Package knowledge is the built-in plugin nekro.knowledge: the AI's
// search of the operator's knowledge base (package internal/knowledge).
//
//   - search_knowledge(query, top_k=5) (TOOL) returns the passages of the
//     documents added to the run's chat and of the global ones that best
//     match the query, by meaning and by keyword, each with its source
//     file and score.
//
// The chat searched is the run's, fixed by the host: no argument names a
// chat, so code in one chat cannot read another chat's documents.
package knowledge

import (
	"strings"

	"github.com/nekro-go/nekro/plugin"
)

var p = plugin.New(plugin.Meta{
	Name:        "Knowledge base",
	ModuleName:  "knowledge",
	Author:      "nekro",
	Version:     "1.0.0",
	Description: "Search the documents the operator added to this chat's knowledge base and the global one.",
})

func init() {
	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "search_knowledge", Description: "搜索知识库 (search the knowledge base)",
		Doc: `Search the knowledge base: the documents the operator added to this chat and the global ones.

Matches by meaning and by keyword; ask in the words the documents would use.

Returns:
    list: up to top_k passages, best first, each a dict with "source" (the file), "scope", "text" and "score".

Example:
    for p in search_knowledge("refund policy for damaged items", 3):
        print(p["source"], p["score"], p["text"][:200])`,
	}, search)

	plugin.Register(p)
}

// SearchArgs are search_knowledge's parameters.
type SearchArgs struct {
	Query string `json:"query" jsonschema:"what to look for, in words the documents would use"`
	TopK  int    `json:"top_k,omitempty" default:"5" jsonschema:"the most passages returned, 1 to 50 (default 5)"`
}

func search(ctx *plugin.Ctx, a SearchArgs) ([]plugin.KnowledgePassage, error) {
	if a.TopK == 0 {
		a.TopK = 5
	}
	ps, err := ctx.SearchKnowledge(strings.TrimSpace(a.Query), a.TopK)
	if err != nil {
		return nil, err
	}
	if ps == nil {
		ps = []plugin.KnowledgePassage{}
	}
	return ps, nil
}
