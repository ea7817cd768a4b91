"""DBChatMessage, the reference's model: the run's chat's stored messages,
read-only, answered from nekro's chat history.

Queries see only the chat of the call they run in (a sandbox method's
or a command's), its latest MAX_ROWS messages; a filter naming another
chat finds nothing. Outside a call (import time, a hook, a background
task) a query fails with NotAvailableError. Creating, changing or
deleting messages is not available to plugins.
"""
from __future__ import annotations

import datetime
import json
from typing import Any, List

from nekro_agent import _link, _unavailable
from nekro_agent.models._base import Model, own_chat_key

__all__ = ["DBChatMessage"]

# How many of the chat's latest messages a query looks through (nekro
# pages its history by this many at most).
MAX_ROWS = 1000


class DBChatMessage(Model):
    _why = "a plugin reads only its call's chat's messages, and cannot change them"

    @classmethod
    async def _source(cls) -> List["DBChatMessage"]:
        key = own_chat_key()
        if not key or _link.current_call.get() == "":
            _unavailable.fail("DBChatMessage queries", "nekro answers them only inside a sandbox method or a "
                                                       "command (the chat of the call)")
        rows = await _link.get().request("chat.messages", limit=MAX_ROWS)
        return [cls._from_nekro(key, r) for r in rows or []]

    @classmethod
    def _from_nekro(cls, chat_key: str, r: dict) -> "DBChatMessage":
        from nekro_agent.api.schemas import split_chat_key

        adapter, _channel, kind = split_chat_key(chat_key)
        user = r.get("role") == "user"
        ts = int(r.get("time") or 0)
        when = datetime.datetime.fromtimestamp(ts, datetime.timezone.utc)
        text = r.get("text") or ""
        sender = r.get("sender_id") or "" if user else "-1"  # the reference's -1: the bot or the system
        name = (r.get("sender_name") or sender) if user else ("SYSTEM" if r.get("role") == "system" else "assistant")
        return cls(id=r.get("id"), message_id=str(r.get("id")), sender_id=sender, sender_name=name,
                   sender_nickname=name, is_tome=0, is_recalled=False, adapter_key=adapter or "", chat_key=chat_key,
                   chat_type=kind or "", platform_userid=sender, content_text=text,
                   content_data=json.dumps([{"type": "text", "text": text}], ensure_ascii=False),
                   raw_cq_code=text, ext_data="{}", send_timestamp=ts, create_time=when, update_time=when)

    @property
    def is_system(self) -> bool:
        return self.sender_id == "-1"

    def parse_content_data(self) -> list:
        from nekro_agent.schemas.chat_message import ChatMessageSegment, ChatMessageSegmentType

        return [ChatMessageSegment(type=ChatMessageSegmentType.TEXT, text=self.content_text)]

    @property
    def ext_data_obj(self) -> Any:
        """The platform's extra data: nekro keeps none (no reply reference)."""
        import types

        return types.SimpleNamespace(ref_msg_id=None)

    def parse_chat_history_prompt(self, one_time_code: str = "", config: Any = None, ref_mode: bool = False) -> str:
        """The message as the reference's history prompt shows it:
        (msg_id:ID)[MM-DD HH:MM:SS id:SENDER] "NAME" 说: TEXT, the text cut
        at the config's per-message length."""
        if config is None:
            from nekro_agent.core.config import config as core_config

            config = core_config
        limit = int(getattr(config, "AI_CONTEXT_LENGTH_PER_MESSAGE", 0) or 0)
        content = self.content_text or ""
        if limit and len(content) > limit:
            content = content[:limit] + "(content too long, omitted)"
        when = datetime.datetime.fromtimestamp(int(self.send_timestamp or 0)).strftime("%m-%d %H:%M:%S")
        prefix = "(msg_id:%s)" % self.message_id if ref_mode and self.message_id else ""
        return '%s[%s id:%s] "%s" 说: %s' % (prefix, when, self.platform_userid, self.sender_nickname, content)
