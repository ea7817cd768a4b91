"""The reference's workspace knowledge base, answered from nekro's.

nekro's knowledge base (docs/knowledge.md) holds documents of two scopes:
a chat's own (chat:<key>) and the global ones. A call sees the documents of
its own chat and the global ones, as search_knowledge does: here they are
the documents of the chat's workspace (DBKBDocument), the global ones with
category "global". nekro keeps a document's text as chunks (each starting
with the end of the one before); the normalized text the reference reads
is those chunks joined without the overlaps, and each DBKBChunk gives its
place in it. The reference's global library assets are not separate in
nekro: none are bound to a workspace.

The reference's ids are integers, nekro's are text (kb_<16 hex digits>): a
document's number is its id's first 36 bits, a chunk's the document's
number times 2**17 plus its place, so both cross JSON as exact numbers.
Every read asks nekro for the call's chat; outside a call (an import, a
background task) it raises NotAvailableError.
"""
from __future__ import annotations

import datetime
import hashlib
import os
from typing import Any, Dict, List, Optional, Tuple

from nekro_agent import _link, _unavailable

CHUNK_BITS = 17
# The longest overlap of a chunk with the one before (knowledge.DefaultOverlapRunes).
MAX_OVERLAP = 120

_FORMATS = {".md": ("markdown", "text/markdown"), ".markdown": ("markdown", "text/markdown"),
            ".txt": ("text", "text/plain"), ".html": ("html", "text/html"), ".htm": ("html", "text/html"),
            ".csv": ("csv", "text/csv"), ".pdf": ("pdf", "application/pdf"),
            ".docx": ("docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
            ".zip": ("text", "application/zip")}
_STATUS = {"queued": "pending", "parsing": "extracting", "embedding": "indexing", "ready": "ready", "failed": "failed"}


def doc_number(doc_id: str) -> int:
    """The reference's integer id of nekro's document doc_id."""
    if doc_id.startswith("kb_") and len(doc_id) >= 12:
        try:
            return int(doc_id[3:12], 16)
        except ValueError:
            pass
    return int(hashlib.sha256(doc_id.encode("utf-8")).hexdigest()[:9], 16)


def chunk_number(doc_num: int, seq: int) -> int:
    return (doc_num << CHUNK_BITS) | seq


def split_chunk_number(chunk_id: int) -> Tuple[int, int]:
    return int(chunk_id) >> CHUNK_BITS, int(chunk_id) & ((1 << CHUNK_BITS) - 1)


def _when(unix: Any) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(int(unix or 0), datetime.timezone.utc)


def _in_call(what: str) -> None:
    from nekro_agent.models._base import own_chat_key

    if not own_chat_key() or _link.current_call.get() == "":
        _unavailable.fail(what, "nekro answers the knowledge base only inside a sandbox method or a command "
                                "(for the call's chat)")


def document_row(d: Dict[str, Any]):
    """A DBKBDocument made from nekro's document d, in the call's chat's
    workspace."""
    from nekro_agent.models._base import own_chat_key
    from nekro_agent.models.db_kb_document import DBKBDocument
    from nekro_agent.models.db_workspace import workspace_id_of

    name = d.get("name") or ""
    ext = os.path.splitext(name)[1].lower()
    fmt, mime = _FORMATS.get(ext, ("text", "text/plain"))
    status = _STATUS.get(d.get("status") or "", "pending")
    updated = _when(d.get("updated"))
    scope = d.get("scope") or ""
    return DBKBDocument(
        id=doc_number(d.get("id") or ""), _nekro_id=d.get("id") or "", _scope=scope,
        workspace_id=workspace_id_of(own_chat_key() or ""), source_path=name, normalized_text_path=None,
        file_name=os.path.basename(name), file_ext=ext.lstrip("."), mime_type=mime, title=os.path.splitext(os.path.basename(name))[0] or name,
        category="global" if scope == "global" else "", tags=[], summary="", source_type="upload", format=fmt,
        is_enabled=True, extract_status=status, sync_status=status, content_hash="", normalized_text_hash="",
        chunk_count=int(d.get("chunks") or 0), file_size=int(d.get("size") or 0),
        last_indexed_at=updated if status == "ready" else None, last_error=d.get("error") or None,
        create_time=_when(d.get("created")), update_time=updated)


async def documents() -> List[Any]:
    """The documents the call's chat sees: its own, then the global ones."""
    _in_call("knowledge base queries")
    rows = await _link.get().request("knowledge.documents")
    return [document_row(d) for d in rows or []]


async def document(number: int) -> Optional[Any]:
    for d in await documents():
        if d.id == int(number):
            return d
    return None


def join_chunks(texts: List[str]) -> Tuple[str, List[Tuple[int, int]]]:
    """The text the chunks were cut from (each chunk's overlap with the one
    before dropped) and each chunk's span in it."""
    out: List[str] = []
    spans: List[Tuple[int, int]] = []
    pos = 0
    prev = ""
    for i, t in enumerate(texts):
        if i == 0:
            start, add = 0, t
        else:
            k = 0
            for n in range(min(len(prev), len(t) - 1, MAX_OVERLAP), 0, -1):
                if prev.endswith(t[:n]):
                    k = n
                    break
            if k:
                start, add = pos - k, t[k:]
            else:
                out.append("\n\n")
                pos += 2
                start, add = pos, t
        out.append(add)
        pos += len(add)
        spans.append((start, start + len(t)))
        prev = t
    return "".join(out), spans


async def chunks(doc) -> Tuple[str, List[Any]]:
    """The normalized text of doc (a DBKBDocument) and its DBKBChunks."""
    from nekro_agent.models.db_kb_chunk import DBKBChunk

    _in_call("knowledge base queries")
    cached = getattr(doc, "_normalized", None)
    if cached is not None:
        return cached
    answer = await _link.get().request("knowledge.chunks", id=doc._nekro_id)
    cs = (answer or {}).get("chunks") or []
    text, spans = join_chunks([c.get("text") or "" for c in cs])
    rows = [DBKBChunk(id=chunk_number(doc.id, int(c.get("seq") or 0)), workspace_id=doc.workspace_id,
                      document_id=doc.id, chunk_index=int(c.get("seq") or 0), heading_path=c.get("source") or "",
                      char_start=s, char_end=e, token_count=0, embedding_ref="", create_time=doc.create_time,
                      update_time=doc.update_time, _text=c.get("text") or "")
            for c, (s, e) in zip(cs, spans)]
    doc._normalized = (text, rows)
    return text, rows


async def search(query: str, top_k: int) -> List[Dict[str, Any]]:
    _in_call("knowledge base searches")
    return await _link.get().request("knowledge.search", query=query, top_k=int(top_k)) or []
