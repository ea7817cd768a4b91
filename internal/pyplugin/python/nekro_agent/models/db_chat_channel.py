"""DBChatChannel: the run's chat, as the reference's row.

get_channel / get / get_or_none with a chat_key answer a row made from
the key (adapter, channel, type) and nekro's defaults; a filter without
a chat_key sees only the chat of the call it runs in (never another
chat's). Changing a chat (set_preset, reset_channel, save) is not
available to plugins.
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from nekro_agent import _unavailable
from nekro_agent.models._base import EPOCH, Model, own_chat_key

__all__ = ["ChannelStatus", "DBChatChannel", "DefaultPreset"]


class ChannelStatus:
    ACTIVE = "active"
    OBSERVE = "observe"
    INACTIVE = "inactive"


class DefaultPreset:
    """The persona when a chat has none of its own."""

    def __init__(self, name: str = "", content: str = ""):
        self.id = -1
        self.name = name
        self.title = name
        self.content = content
        self.description = ""
        self.avatar = ""
        self.tags = ""

    @classmethod
    def _nekro(cls) -> "DefaultPreset":
        from nekro_agent.core.config import config

        return cls(name=config.AI_CHAT_PRESET_NAME, content=config.AI_CHAT_PRESET_SETTING)


class DBChatChannel(Model):
    _why = "a plugin sees only its run's chat, and cannot change it"

    @classmethod
    def _row(cls, chat_key: str) -> "DBChatChannel":
        from nekro_agent.api.schemas import split_chat_key

        adapter, channel, kind = split_chat_key(chat_key)
        return cls(id=0, is_active=True, observe_mode=False, preset_id=None, data="{}", adapter_key=adapter or "",
                   channel_id=channel, channel_name=channel, channel_type=kind, chat_key=chat_key,
                   conversation_start_time=EPOCH, workspace_id=None, create_time=EPOCH, update_time=EPOCH)

    @classmethod
    def _source(cls) -> List["DBChatChannel"]:
        key = own_chat_key()
        return [cls._row(key)] if key else []

    @classmethod
    def filter(cls, *args: Any, **kw: Any):
        from nekro_agent.models._base import Query

        key = kw.get("chat_key")
        if isinstance(key, str):  # a row made from the key the plugin already has
            return Query(cls, lambda: [cls._row(key)]).filter(**kw)
        return super().filter(*args, **kw)

    @classmethod
    async def get_channel(cls, chat_key: str) -> "DBChatChannel":
        return cls._row(chat_key)

    @property
    def chat_type(self):
        from nekro_agent.schemas.chat_message import ChatType

        return ChatType.from_chat_key(self.chat_key)

    @property
    def channel_status(self) -> str:
        return ChannelStatus.ACTIVE

    @property
    def adapter(self):
        from nekro_agent.adapters.utils import adapter_utils

        return adapter_utils.get_adapter(self.adapter_key)

    def get_channel_data(self) -> Dict[str, Any]:
        return json.loads(self.data or "{}")

    async def get_preset(self) -> DefaultPreset:
        return DefaultPreset._nekro()

    async def get_effective_config(self):
        from nekro_agent.core.config import config

        return config

    async def get_channel_name(self) -> str:
        return self.channel_name or ""

    def get_custom_channel_name(self) -> Optional[str]:
        return None

    async def sync_channel_name(self) -> None:
        return None

    async def set_preset(self, preset_id: Optional[int] = None) -> str:
        _unavailable.fail("DBChatChannel.set_preset()", "nekro has no presets (the persona is the operator's system prompt)")

    async def reset_channel(self) -> None:
        _unavailable.fail("DBChatChannel.reset_channel()", "a chat is reset by its operator (nekro chats reset)")

    async def set_active(self, is_active: bool) -> None:
        _unavailable.fail("DBChatChannel.set_active()", self._why)

    async def set_channel_status(self, status: Any) -> None:
        _unavailable.fail("DBChatChannel.set_channel_status()", self._why)
