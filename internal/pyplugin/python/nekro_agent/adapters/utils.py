"""adapter_utils: the adapter of a chat, as the reference's plugins get
it. Sending goes through nekro (the run's own chat)."""
from __future__ import annotations

from typing import Any

from nekro_agent import _unavailable

__all__ = ["AdapterUtils", "adapter_utils"]


class Adapter(_unavailable.Service):
    """A platform adapter as plugins see it: its key, and sending to a
    chat through nekro. Anything else of the reference's adapter raises."""

    def __init__(self, key: str):
        super().__init__("adapter %s" % key, "nekro's platform adapters run in nekro; a plugin can send to its "
                                             "run's chat (_ctx.send_text, ...) and read the chat from _ctx",
                         key=key)

    def build_chat_key(self, channel_id: str) -> str:
        return "%s-%s" % (self.key, channel_id)

    def parse_chat_key(self, chat_key: str):
        adapter, sep, channel = chat_key.partition("-")
        if not sep:
            raise ValueError("not a chat key of a platform: %s" % chat_key)
        return adapter, channel

    async def get_self_info(self):
        """The bot's own account on the platform (PlatformUser), asked of
        nekro's adapter: OneBot v11 only (get_login_info)."""
        from nekro_agent.adapters.interface.schemas.platform import PlatformUser

        if self.key != "onebot_v11":
            _unavailable.fail("adapter %s get_self_info()" % self.key,
                              "nekro's %s adapter does not give plugins its bot's account (only OneBot v11's does)"
                              % self.key)
        from nekro_agent.adapters.onebot_v11.core.bot import query

        info = await query("get_login_info", {}) or {}
        return PlatformUser(platform_name="QQ", user_id=str(info.get("user_id", "")),
                            user_name=str(info.get("nickname", "")))

    async def forward_message(self, request: Any) -> bool:
        """Send a PlatformSendRequest's text to its chat."""
        from nekro_agent.api import message

        text = "".join(getattr(s, "content", "") for s in getattr(request, "segments", []) or [])
        await message.send_text(request.chat_key, text)
        return True


class AdapterUtils:
    @staticmethod
    def get_adapter(adapter_key: str) -> Adapter:
        return Adapter(adapter_key)

    @staticmethod
    async def get_adapter_for_chat(chat_key: str) -> Adapter:
        adapter, sep, _ = chat_key.partition("-")
        if not sep:
            raise ValueError("chat %s is not a chat of a platform" % chat_key)
        return Adapter(adapter)

    @staticmethod
    async def get_adapter_for_ctx(ctx: Any) -> Adapter:
        return await AdapterUtils.get_adapter_for_chat(ctx.chat_key)


adapter_utils = AdapterUtils()
