"""DBKBChunk, the reference's model: the chunks of the call's chat's
knowledge documents, answered from nekro's knowledge base (see
nekro_agent._knowledge). A query names its chunk (id=) or document
(document_id=); one over every chunk of every document is not answered."""
from __future__ import annotations

from typing import Any, List

from nekro_agent import _unavailable
from nekro_agent.models._base import Model, Query

__all__ = ["DBKBChunk"]


class DBKBChunk(Model):
    _why = "a plugin reads the knowledge base of its call's chat; documents are added by nekro's operator"

    @classmethod
    def filter(cls, *args: Any, **kw: Any) -> Query:
        from nekro_agent import _knowledge

        doc_num = kw.get("document_id")
        if doc_num is None and "id" in kw:
            doc_num = _knowledge.split_chunk_number(kw["id"])[0]

        async def source() -> List[Any]:
            if doc_num is None:
                _unavailable.fail("DBKBChunk queries without id= or document_id=",
                                  "nekro reads a knowledge document's chunks one document at a time")
            doc = await _knowledge.document(doc_num)
            if doc is None:
                return []
            return (await _knowledge.chunks(doc))[1]

        return Query(cls, source).filter(*args, **kw)

    @property
    def content(self) -> str:
        return getattr(self, "_text", "")
