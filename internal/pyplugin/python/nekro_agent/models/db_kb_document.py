"""DBKBDocument, the reference's model: the documents of the call's chat's
workspace, answered from nekro's knowledge base (see nekro_agent._knowledge)."""
from __future__ import annotations

from typing import Any, List

from nekro_agent.models._base import Model

__all__ = ["DBKBDocument"]


class DBKBDocument(Model):
    _why = "a plugin reads the knowledge base of its call's chat; documents are added by nekro's operator"

    @classmethod
    async def _source(cls) -> List[Any]:
        from nekro_agent import _knowledge

        return await _knowledge.documents()
