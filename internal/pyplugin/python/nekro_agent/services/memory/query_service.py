"""The reference's memory queries, answered from nekro's long-term memory.

nekro keeps memories as plain facts learned in a chat (about the chat or
one of its users): here they are the reference's "paragraph" memories of
the chat's workspace. A search sees only the memories learned in the call's
chat (never another chat's), ranked by meaning when an embedding model is
configured; details and origins are those of a memory of that chat. nekro
has no entities, relations or episodes, and does not keep which messages a
memory came from.
"""
from __future__ import annotations

import datetime
from enum import Enum
from typing import Any, Dict, List, Optional, Union

from pydantic import BaseModel, Field

from nekro_agent import _link, _unavailable

__all__ = ["MemoryDetailResponse", "MemoryObjectType", "MemoryOriginTraceResponse", "MemorySearchItem",
           "MemorySearchResponse", "get_workspace_memory_detail", "search_workspace_memories",
           "trace_workspace_memory_origin"]


class MemoryObjectType(str, Enum):
    PARAGRAPH = "paragraph"
    RELATION = "relation"
    ENTITY = "entity"
    EPISODE = "episode"


class MemorySearchItem(BaseModel):
    target_id: int
    source_type: str
    episode_id: Optional[int] = None
    paragraph_id: Optional[int] = None
    relation_id: Optional[int] = None
    summary: str
    content_preview: str
    cognitive_type: str
    knowledge_type: str
    similarity_score: float
    effective_weight: float
    event_time: Optional[str] = None
    origin_chat_key: Optional[str] = None


class MemorySearchResponse(BaseModel):
    workspace_id: int
    query: str
    total: int
    items: List[MemorySearchItem] = Field(default_factory=list)


class MemoryTraceAnchorMessage(BaseModel):
    db_id: int
    message_id: str
    sender_name: str
    send_timestamp: int
    content_preview: str


class MemoryOriginTraceResponse(BaseModel):
    workspace_id: int
    memory_type: str
    memory_id: int
    origin_kind: Optional[str] = None
    origin_ref: Optional[str] = None
    origin_chat_key: Optional[str] = None
    anchor_msg_id: Optional[str] = None
    anchor_msg_id_start: Optional[str] = None
    anchor_msg_id_end: Optional[str] = None
    anchor_timestamp_start: Optional[int] = None
    anchor_timestamp_end: Optional[int] = None
    messages: List[MemoryTraceAnchorMessage] = Field(default_factory=list)


class MemoryDetailRelationItem(BaseModel):
    id: int
    subject_entity_id: int
    subject_name: str
    predicate: str
    object_entity_id: int
    object_name: str
    paragraph_id: Optional[int] = None
    effective_weight: float


class MemoryDetailResponse(BaseModel):
    workspace_id: int
    memory_type: str
    memory_id: int
    title: str
    summary: Optional[str] = None
    content: Optional[str] = None
    metadata: Dict[str, Any] = Field(default_factory=dict)
    related_relations: List[MemoryDetailRelationItem] = Field(default_factory=list)
    related_paragraph_ids: List[int] = Field(default_factory=list)
    related_entity_ids: List[int] = Field(default_factory=list)


def _check(workspace_id: int) -> str:
    from nekro_agent.models._base import own_chat_key
    from nekro_agent.models.db_workspace import workspace_id_of

    key = own_chat_key()
    if not key or _link.current_call.get() == "":
        _unavailable.fail("memory queries", "nekro answers them only inside a sandbox method or a command "
                                            "(for the call's chat)")
    if int(workspace_id) != workspace_id_of(key):
        raise ValueError("workspace %s is not the workspace of this call's chat" % workspace_id)
    return key


def _paragraph_only(memory_type: Union[MemoryObjectType, str]) -> None:
    kind = getattr(memory_type, "value", memory_type)
    if kind != MemoryObjectType.PARAGRAPH.value:
        raise ValueError("memory type %r: nekro keeps memories as plain facts (paragraph); it has no entities, "
                         "relations or episodes" % kind)


def _iso(value: Any) -> Optional[str]:
    return str(value) if value else None


async def search_workspace_memories(workspace_id: int, query: str, limit: int = 6,
                                    cognitive_type: Optional[str] = None, knowledge_type: Optional[str] = None,
                                    time_from: Optional[datetime.datetime] = None,
                                    time_to: Optional[datetime.datetime] = None, **_: Any) -> MemorySearchResponse:
    key = _check(workspace_id)
    rows = await _link.get().request("memory.search", query=query, limit=max(1, int(limit or 6))) or []
    items = []
    n = len(rows)
    for i, m in enumerate(rows):
        text = m.get("text") or ""
        items.append(MemorySearchItem(
            target_id=int(m["id"]), source_type="paragraph", paragraph_id=int(m["id"]), summary=text[:80],
            content_preview=text, cognitive_type="semantic",
            knowledge_type="preference" if m.get("user_id") else "fact",
            similarity_score=round(1.0 - i / max(n, 1), 4), effective_weight=1.0,
            event_time=_iso(m.get("updated_at")), origin_chat_key=m.get("chat_key") or key))
    if cognitive_type:
        items = [x for x in items if x.cognitive_type == cognitive_type]
    if knowledge_type:
        items = [x for x in items if x.knowledge_type == knowledge_type]
    return MemorySearchResponse(workspace_id=int(workspace_id), query=query, total=len(items), items=items)


async def _memory(memory_id: int) -> Dict[str, Any]:
    m = await _link.get().request("memory.get", id=int(memory_id))
    if not m:
        raise ValueError("memory %s not found in this chat" % memory_id)
    return m


async def get_workspace_memory_detail(workspace_id: int, memory_type: Union[MemoryObjectType, str],
                                      memory_id: int) -> MemoryDetailResponse:
    _check(workspace_id)
    _paragraph_only(memory_type)
    m = await _memory(memory_id)
    text = m.get("text") or ""
    return MemoryDetailResponse(
        workspace_id=int(workspace_id), memory_type="paragraph", memory_id=int(m["id"]), title=text[:40],
        summary=text, content=text,
        metadata={"about_user": m.get("user_id") or None, "created_at": _iso(m.get("created_at")),
                  "updated_at": _iso(m.get("updated_at")), "scope": m.get("scope") or ""})


async def trace_workspace_memory_origin(workspace_id: int, memory_type: Union[MemoryObjectType, str],
                                        memory_id: int) -> MemoryOriginTraceResponse:
    key = _check(workspace_id)
    _paragraph_only(memory_type)
    m = await _memory(memory_id)
    # nekro learns a memory from a chat's messages but keeps no link to them.
    return MemoryOriginTraceResponse(workspace_id=int(workspace_id), memory_type="paragraph",
                                     memory_id=int(m["id"]), origin_kind="chat", origin_ref=None,
                                     origin_chat_key=m.get("chat_key") or key)


__getattr__ = _unavailable.module_getattr("nekro_agent.services.memory.query_service",
                                          "nekro's long-term memory is read with search_workspace_memories, "
                                          "get_workspace_memory_detail and trace_workspace_memory_origin")
