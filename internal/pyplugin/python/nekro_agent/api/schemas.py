"""AgentCtx: what a sandbox method and a hook receive as _ctx."""
from __future__ import annotations

from typing import Optional

from nekro_agent import _link


class AgentCtx:
    """The context of one call: the run's chat, user and sandbox.

    nekro fixes them when the run starts; nothing the sandboxed code sends
    can change them. Unlike the reference, from_user_id is the run's real
    user inside sandbox methods (None when the run has none).
    """

    def __init__(self, from_chat_key: Optional[str] = None, container_key: Optional[str] = None,
                 from_user_id: Optional[str] = None, run_id: str = "", call: str = "",
                 shared_path: str = "", upload_path: str = ""):
        self.from_chat_key = from_chat_key
        self.container_key = container_key
        self._user_id = from_user_id or None
        self.run_id = run_id
        self._call = call
        self._paths = (shared_path, upload_path)
        self._stage = None  # the call's copy of /app/shared, made when the method first uses fs

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
    def create_by_chat_key(cls, chat_key: str, container_key: Optional[str] = None, **_):
        return cls(from_chat_key=chat_key, container_key=container_key)

    def __repr__(self) -> str:
        return "AgentCtx(chat_key=%r, user=%r, container_key=%r)" % (self.from_chat_key, self._user_id, self.container_key)


def _call_token(ctx) -> str:
    return getattr(ctx, "_call", "") or _link.current_call.get()
