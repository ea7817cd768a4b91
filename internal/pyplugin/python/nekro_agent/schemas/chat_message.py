"""ChatMessage: a user's message as a mount_on_user_message hook sees it."""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

__all__ = ["ChatMessage"]


class ChatMessage:
    """The reference's fields; nekro fills those it knows (sender, chat,
    text, time) and leaves the platform ones empty."""

    def __init__(self, chat_key: str, sender_id: str = "", sender_name: str = "", content_text: str = "",
                 message_id: str = "", send_timestamp: Optional[int] = None, **extra: Any):
        self.message_id = message_id
        self.sender_id = sender_id
        self.sender_name = sender_name
        self.sender_nickname = sender_name
        self.adapter_key = extra.get("adapter_key", "")
        self.platform_userid = sender_id
        self.is_tome = 0
        self.is_recalled = False
        self.chat_key = chat_key
        self.chat_type = extra.get("chat_type", "")
        self.content_text = content_text
        self.content_data: List[Any] = []
        self.raw_cq_code = ""
        self.ext_data: Dict[str, Any] = {}
        self.send_timestamp = send_timestamp if send_timestamp is not None else int(time.time())

    def __repr__(self) -> str:
        return "ChatMessage(chat_key=%r, sender_id=%r, content_text=%r)" % (self.chat_key, self.sender_id, self.content_text)
