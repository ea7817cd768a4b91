"""DBKBAssetChunk, the reference's model: nekro's knowledge base has no global
library assets apart from its documents (global documents are every
chat's: DBKBDocument), so none are bound to a workspace and queries find
none."""
from __future__ import annotations

from typing import Any, List

from nekro_agent.models._base import Model

__all__ = ["DBKBAssetChunk"]


class DBKBAssetChunk(Model):
    _why = "nekro's knowledge base has no library assets apart from its documents"

    @classmethod
    def _source(cls) -> List[Any]:
        return []
