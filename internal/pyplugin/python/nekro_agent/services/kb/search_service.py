"""The reference's workspace kb search, answered by nekro's knowledge
base search (meaning and keywords fused, docs/knowledge.md) over the call's
chat's documents and the global ones, grouped by document."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from nekro_agent import _knowledge, _unavailable

__all__ = ["search_workspace_kb"]

PREVIEW_MAX_CHARS = 300


def _preview(text: str, limit: int = PREVIEW_MAX_CHARS) -> str:
    compact = " ".join(text.split())
    return compact if len(compact) <= limit else compact[: limit - 1] + "…"


async def search_workspace_kb(workspace_id: int, query: str, limit: int = 5, max_chunks_per_document: int = 2,
                              category: str = "", tags: Optional[List[str]] = None, **_: Any):
    from nekro_agent.schemas.kb import KBSearchDocument, KBSearchItem, KBSearchResponse, KBSearchSnippet
    from nekro_agent.services.kb.document_service import _check_workspace

    _check_workspace(workspace_id)
    limit = max(1, int(limit or 5))
    per_doc = max(1, int(max_chunks_per_document or 1))
    docs = {d._nekro_id: d for d in await _knowledge.documents()}
    passages = await _knowledge.search(query, min(50, limit * per_doc * 3))
    items: List[KBSearchItem] = []
    grouped: Dict[str, List[KBSearchItem]] = {}
    for p in passages:
        d = docs.get(p.get("document") or "")
        if d is None:
            continue
        if category and d.category != category:
            continue
        if tags and not set(tags) <= set(d.tags or []):
            continue
        item = KBSearchItem(document_id=d.id, chunk_id=_knowledge.chunk_number(d.id, int(p.get("seq") or 0)),
                            title=d.title, file_name=d.file_name, format=d.format, source_path=d.source_path,
                            heading_path=p.get("source") or "", category=d.category, tags=list(d.tags or []),
                            content_preview=_preview(p.get("text") or ""), score=float(p.get("score") or 0))
        items.append(item)
        grouped.setdefault(d._nekro_id, []).append(item)
    documents = []
    for nid, hits in grouped.items():
        d = docs[nid]
        top = hits[:per_doc]
        documents.append(KBSearchDocument(
            document_id=d.id, title=d.title, file_name=d.file_name, format=d.format, source_path=d.source_path,
            category=d.category, tags=list(d.tags or []), document_score=max(h.score for h in hits),
            matched_chunk_count=len(hits), headings=sorted({h.heading_path for h in top if h.heading_path}),
            best_match_excerpt=top[0].content_preview,
            snippets=[KBSearchSnippet(chunk_id=h.chunk_id, heading_path=h.heading_path,
                                      content_preview=h.content_preview, score=h.score) for h in top]))
    documents.sort(key=lambda x: -x.document_score)
    documents = documents[:limit]
    hint = ("Read hit-local context with read_workspace_kb_chunk_context_tool(chunk_id=...), then the full text "
            "if needed." if documents else "No match: try other words, or check the catalog.")
    return KBSearchResponse(workspace_id=int(workspace_id), query=query, total=len(items), items=items[: limit * per_doc],
                            document_total=len(documents), documents=documents,
                            suggested_document_ids=[x.document_id for x in documents[:3]], next_action_hint=hint)


__getattr__ = _unavailable.module_getattr("nekro_agent.services.kb.search_service",
                                          "nekro's knowledge base is searched with search_workspace_kb")
