"""DBWorkspace, the reference's model, as nekro has workspaces: one per chat.

The reference binds chats to workspaces (a Claude Code sandbox with its
own knowledge base and memories). In nekro every chat is its own
workspace: its knowledge base is the chat's documents and the global ones
(docs/knowledge.md), its memories those learned in the chat. A query sees
only the workspace of the call's chat; a workspace is never "active" (nekro
runs no Claude Code sandbox), and creating, changing or deleting one is
not available.
"""
from __future__ import annotations

import hashlib
from typing import Any, List, Optional

from nekro_agent.models._base import EPOCH, Model, own_chat_key

__all__ = ["DBWorkspace", "workspace_id_of"]


def workspace_id_of(chat_key: str) -> int:
    """The id of chat_key's workspace: stable, and small enough to cross
    JSON as an exact number."""
    return int(hashlib.sha256(chat_key.encode("utf-8")).hexdigest()[:12], 16)


class DBWorkspace(Model):
    _why = ("nekro has one workspace per chat (its knowledge base and memories) and runs no Claude Code sandbox: "
            "workspaces are not created, changed or deleted")

    @classmethod
    def _for_chat(cls, chat_key: str) -> "DBWorkspace":
        return cls(id=workspace_id_of(chat_key), name=chat_key, description="the workspace of chat %s" % chat_key,
                   status="stopped", sandbox_image="", sandbox_version="latest", container_name=None,
                   container_id=None, host_port=None, runtime_policy="agent", last_heartbeat=None, last_error=None,
                   metadata={"chat_key": chat_key}, create_time=EPOCH, update_time=EPOCH)

    @classmethod
    def _source(cls) -> List["DBWorkspace"]:
        key = own_chat_key()
        return [cls._for_chat(key)] if key else []

    @property
    def chat_key(self) -> str:
        return self.metadata.get("chat_key", "")

    @property
    def api_endpoint(self) -> str:
        from nekro_agent import _unavailable

        _unavailable.fail("DBWorkspace.api_endpoint", "nekro runs no Claude Code sandbox")

    async def get_bound_channels(self) -> List[Any]:
        from nekro_agent.models.db_chat_channel import DBChatChannel

        return [DBChatChannel._row(self.chat_key)]


def own_workspace() -> Optional[DBWorkspace]:
    key = own_chat_key()
    return DBWorkspace._for_chat(key) if key else None
