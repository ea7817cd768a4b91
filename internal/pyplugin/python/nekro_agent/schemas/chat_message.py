"""ChatMessage and the chat types (the reference's
nekro_agent.schemas.chat_message)."""
from __future__ import annotations

import time
from enum import Enum
from typing import Any, Dict, List, Optional

__all__ = ["ChatMessage", "ChatMessageSegment", "ChatMessageSegmentType", "ChatType"]


class ChatType(Enum):
    PRIVATE = "private"
    GROUP = "group"
    UNKNOWN = "unknown"

    @classmethod
    def from_chat_key(cls, chat_key: str) -> "ChatType":
        """group_123 / onebot_v11-group_123 is a group, private_... a
        private chat, anything else unknown."""
        channel = (chat_key or "").split("-", 1)[-1]
        kind = channel.split("_", 1)[0]
        try:
            return cls(kind)
        except ValueError:
            return cls.UNKNOWN


class ChatMessageSegmentType(Enum):
    TEXT = "text"
    IMAGE = "image"
    VOICE = "voice"
    VIDEO = "video"
    FILE = "file"
    REFERENCE = "reference"
    AT = "at"
    JSON_CARD = "json_card"


class ChatMessageSegment:
    def __init__(self, type: Any = ChatMessageSegmentType.TEXT, text: str = "", **extra: Any):
        self.type = ChatMessageSegmentType(type)
        self.text = text
        for k, v in extra.items():
            setattr(self, k, v)


class ChatMessage:
    """The reference's fields; nekro fills those it knows (sender, chat,
    text, time) and leaves the platform ones empty."""

    def __init__(self, chat_key: str, sender_id: str = "", sender_name: str = "", content_text: str = "",
                 message_id: str = "", send_timestamp: Optional[int] = None, **extra: Any):
        self.message_id = message_id
        self.sender_id = sender_id
        self.sender_name = sender_name
        self.sender_nickname = extra.get("sender_nickname", sender_name)
        self.adapter_key = extra.get("adapter_key", "") or (chat_key.split("-", 1)[0] if "-" in chat_key else "")
        self.platform_userid = extra.get("platform_userid", sender_id)
        self.is_tome = extra.get("is_tome", 0)
        self.is_recalled = False
        self.chat_key = chat_key
        self.chat_type = extra.get("chat_type") or ChatType.from_chat_key(chat_key)
        self.content_text = content_text
        self.content_data: List[Any] = list(extra.get("content_data") or [])
        self.raw_cq_code = ""
        self.ext_data: Dict[str, Any] = {}
        self.send_timestamp = send_timestamp if send_timestamp is not None else int(time.time())

    def is_empty(self) -> bool:
        return not self.content_text and not self.content_data

    def __repr__(self) -> str:
        return "ChatMessage(chat_key=%r, sender_id=%r, content_text=%r)" % (self.chat_key, self.sender_id, self.content_text)
