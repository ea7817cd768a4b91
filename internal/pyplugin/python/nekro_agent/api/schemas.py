"""AgentCtx: what a sandbox method and a hook receive as _ctx; and the
reference's other schema types of nekro_agent.api.schemas."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union

from nekro_agent import _link
from nekro_agent.schemas.agent_message import AgentMessageSegment, AgentMessageSegmentType

__all__ = ["AgentCtx", "AgentMessageSegment", "AgentMessageSegmentType", "MessageContent", "WebhookRequest"]

MessageContent = Union[str, List[AgentMessageSegment]]


class WebhookRequest:
    """A webhook's request (headers and JSON body)."""

    def __init__(self, headers: Optional[Dict[str, str]] = None, body: Optional[Dict[str, Any]] = None):
        self.headers = dict(headers or {})
        self.body = dict(body or {})


def split_chat_key(chat_key: Optional[str]) -> Tuple[Optional[str], Optional[str], Optional[str]]:
    """(adapter_key, channel_id, channel_type) of a chat key, as the
    reference's adapters build them: "onebot_v11-group_123" is
    ("onebot_v11", "group_123", "group"). A chat of no platform (nekro's
    own: "c1", "group_9") has no adapter_key; its channel_id is the key."""
    if not chat_key:
        return None, None, None
    known = _split_keys.get(chat_key)
    if known is not None:
        return known
    from nekro_agent.schemas.chat_message import ChatType

    adapter, sep, channel = chat_key.partition("-")
    if not sep or not channel or not adapter.replace("_", "").isalnum():
        adapter, channel = None, chat_key
    known = adapter, channel, ChatType.from_chat_key(chat_key).value
    if len(_split_keys) >= 4096:  # a bound, not an LRU: a host serves few chats at a time
        _split_keys.clear()
    _split_keys[chat_key] = known
    return known


# split_chat_key's answers: every call's AgentCtx splits its chat's key,
# and the chat type's enum lookup is most of a call's own cost otherwise.
_split_keys: Dict[str, Tuple[Optional[str], Optional[str], Optional[str]]] = {}


class AgentCtx:
    """The context of one call: the run's chat, user and sandbox.

    nekro fixes them when the run starts; nothing the sandboxed code sends
    can change them. Unlike the reference, from_user_id is the run's real
    user inside sandbox methods (None when the run has none).
    """

    def __init__(self, from_chat_key: Optional[str] = None, container_key: Optional[str] = None,
                 from_user_id: Optional[str] = None, run_id: str = "", call: str = "",
                 shared_path: str = "", upload_path: str = "", **fields: Any):
        self.from_chat_key = from_chat_key
        self.container_key = container_key
        self._user_id = from_user_id or None
        self.run_id = run_id
        self._call = call
        self._paths = (shared_path, upload_path)
        self._stage = None  # the call's copy of /app/shared, made when the method first uses fs
        self.adapter_key, self.channel_id, self.channel_type = split_chat_key(from_chat_key)
        self.channel_name: Optional[str] = self.channel_id
        self.webhook_request: Optional[WebhookRequest] = None
        if fields:
            for k in ("adapter_key", "channel_id", "channel_type", "channel_name", "webhook_request"):
                if fields.get(k) is not None:
                    setattr(self, k, fields[k])

    @property
    def chat_key(self) -> str:
        if not self.from_chat_key:
            raise ValueError("missing from_chat_key")
        return self.from_chat_key

    @property
    def from_user_id(self) -> Optional[str]:
        return self._user_id

    from_platform_userid = from_user_id

    @property
    def db_chat_channel(self):
        """The run's chat as the reference's DBChatChannel row (read-only)."""
        if not self.from_chat_key:
            return None
        from nekro_agent.models.db_chat_channel import DBChatChannel

        return DBChatChannel._row(self.from_chat_key)

    @property
    def db_user(self):
        """The run's user as the reference's DBUser row (read-only), or None."""
        if not self._user_id:
            return None
        from nekro_agent.models.db_user import DBUser

        return DBUser._row(self._user_id, self.adapter_key or "")

    @property
    def adapter(self):
        """The adapter of the run's chat (nekro_agent.adapters)."""
        if not self.adapter_key:
            raise ValueError("missing adapter_key: chat %s is not a chat of a platform" % self.from_chat_key)
        from nekro_agent.adapters.utils import adapter_utils

        return adapter_utils.get_adapter(self.adapter_key)

    async def get_core_config(self):
        from nekro_agent.core.config import config

        return config

    async def get_onebot_v11_bot(self):
        if self.adapter_key != "onebot_v11":
            raise ValueError("not a OneBot v11 chat (adapter %s)" % self.adapter_key)
        from nekro_agent.adapters.onebot_v11.core.bot import get_bot

        return get_bot()

    async def get_bound_workspace(self):
        """The chat's workspace: nekro has one per chat (its knowledge base
        and memories), never bound to another; None outside a chat."""
        from nekro_agent.models.db_workspace import DBWorkspace

        return DBWorkspace._for_chat(self.from_chat_key) if self.from_chat_key else None

    async def get_preset_by_id(self, preset_id: int):
        from nekro_agent.models.db_preset import DBPreset

        return None if preset_id == -1 else await DBPreset.get_or_none(id=preset_id)

    async def get_effective_preset_by_id(self, preset_id: int = -1):
        from nekro_agent.models.db_chat_channel import DefaultPreset

        return DefaultPreset._nekro()

    async def current_preset(self):
        return await self.get_effective_preset_by_id()

    async def set_preset(self, preset_id: Optional[int] = None) -> bool:
        from nekro_agent import _unavailable

        _unavailable.fail("AgentCtx.set_preset()", "nekro has no presets (the persona is the operator's system prompt)")

    async def push_system(self, message: str, trigger_agent: bool = False) -> None:
        from nekro_agent.api import message as _message

        await _message.push_system(self.chat_key, message, self, trigger_agent=trigger_agent)

    @property
    def fs(self):
        from nekro_agent.tools.file_system import FileSystem

        return FileSystem(self.chat_key, self.container_key or "", self._call, *self._paths, holder=self)

    @property
    def ms(self):
        from nekro_agent.api import message

        return message

    async def send_text(self, content: str, *, record: bool = True) -> None:
        from nekro_agent.api import message

        await message.send_text(self.chat_key, content, self, record=record)

    async def send_image(self, file_path: str, *, record: bool = True) -> None:
        from nekro_agent.api import message

        await message.send_image(self.chat_key, file_path, self, record=record)

    async def send_file(self, file_path: str, *, record: bool = True) -> None:
        from nekro_agent.api import message

        await message.send_file(self.chat_key, file_path, self, record=record)

    @classmethod
    async def create_by_chat_key(cls, chat_key: str, container_key: Optional[str] = None, **_):
        """A context for chat_key (for timers and background work, as the
        reference's; sending from it is a send outside a call)."""
        return cls(from_chat_key=chat_key, container_key=container_key)

    @classmethod
    def create_by_db_chat_channel(cls, db_chat_channel, container_key: Optional[str] = None, **_):
        return cls(from_chat_key=db_chat_channel.chat_key, container_key=container_key)

    @classmethod
    async def create_by_webhook(cls, webhook_request: WebhookRequest):
        ctx = cls()
        ctx.webhook_request = webhook_request
        return ctx

    def __repr__(self) -> str:
        return "AgentCtx(chat_key=%r, user=%r, container_key=%r)" % (self.from_chat_key, self._user_id, self.container_key)


def _call_token(ctx) -> str:
    return getattr(ctx, "_call", "") or _link.current_call.get()
