"""The reference's global kb library: nekro's knowledge base has no
library assets apart from its documents (global documents are every
chat's, in document_service), so there are none."""
from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

from nekro_agent import _unavailable

__all__ = ["get_asset", "list_asset_bindings", "list_assets", "read_asset_normalized_content_async",
           "read_asset_source_content_async", "resolve_kb_library_normalized_path", "resolve_kb_library_source_path"]

_WHY = "nekro's knowledge base has no library assets apart from its documents (global documents are every chat's)"


async def list_assets() -> List[Any]:
    return []


async def get_asset(asset_id: int) -> Optional[Any]:
    return None


async def list_asset_bindings(asset_id: int) -> List[Any]:
    return []


async def read_asset_source_content_async(asset: Any) -> str:
    _unavailable.fail("read_asset_source_content_async()", _WHY)


async def read_asset_normalized_content_async(asset: Any) -> str:
    _unavailable.fail("read_asset_normalized_content_async()", _WHY)


def resolve_kb_library_source_path(rel_path: str) -> Path:
    _unavailable.fail("resolve_kb_library_source_path()", _WHY)


def resolve_kb_library_normalized_path(rel_path: str) -> Path:
    _unavailable.fail("resolve_kb_library_normalized_path()", _WHY)


__getattr__ = _unavailable.module_getattr("nekro_agent.services.kb.library_service", _WHY)
