"""The reference's kb document service: the documents of the call's chat's
workspace (its own knowledge documents and the global ones), read-only.
Creating, changing and deleting documents is the operator's (nekro
knowledge add, the web UI's Knowledge page)."""
from __future__ import annotations

from typing import Any, List, Optional

from nekro_agent import _knowledge, _unavailable

__all__ = ["document_to_list_item", "get_document", "list_documents", "read_normalized_content",
           "read_normalized_content_async", "read_source_content", "read_source_content_async"]

_WHY = "knowledge documents are added and removed by nekro's operator (nekro knowledge add, the web UI)"


def _check_workspace(workspace_id: int) -> None:
    from nekro_agent.models.db_workspace import own_workspace

    ws = own_workspace()
    if ws is None or int(workspace_id) != ws.id:
        raise ValueError("workspace %s is not the workspace of this call's chat" % workspace_id)


async def list_documents(workspace_id: int) -> List[Any]:
    _check_workspace(workspace_id)
    return await _knowledge.documents()


async def get_document(workspace_id: int, document_id: int) -> Optional[Any]:
    _check_workspace(workspace_id)
    return await _knowledge.document(document_id)


async def read_normalized_content_async(document: Any) -> str:
    return (await _knowledge.chunks(document))[0]


async def read_source_content_async(document: Any) -> str:
    """nekro keeps a document's text, not its file: the text is the source."""
    return (await _knowledge.chunks(document))[0]


def _sync(what: str):
    def f(*_a: Any, **_k: Any) -> str:
        _unavailable.fail(what, "nekro reads knowledge documents asynchronously: use %s_async" % what.rstrip("()"))

    return f


read_normalized_content = _sync("read_normalized_content()")
read_source_content = _sync("read_source_content()")


def document_to_list_item(document: Any):
    from nekro_agent.schemas.kb import KBDocumentListItem

    return KBDocumentListItem(
        id=document.id, workspace_id=document.workspace_id, title=document.title, category=document.category,
        tags=list(document.tags or []), summary=document.summary, file_name=document.file_name,
        file_ext=document.file_ext, mime_type=document.mime_type, format=document.format,
        source_path=document.source_path, source_workspace_path="", is_enabled=document.is_enabled,
        extract_status=document.extract_status, sync_status=document.sync_status, chunk_count=document.chunk_count,
        file_size=document.file_size, last_error=document.last_error,
        last_indexed_at=document.last_indexed_at.isoformat() if document.last_indexed_at else None,
        update_time=document.update_time.isoformat(), create_time=document.create_time.isoformat())


__getattr__ = _unavailable.module_getattr("nekro_agent.services.kb.document_service", _WHY)
