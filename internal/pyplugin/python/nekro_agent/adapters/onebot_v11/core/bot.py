"""get_bot: nonebot's OneBot v11 Bot in the reference. nekro's OneBot
adapter is its own (no nonebot) and runs in nekro; the Bot plugins get
here asks it, for the chat of the call it runs in (a sandbox method's or
a command's), the read-only actions of its allow list (get_login_info,
get_group_info, get_group_member_info, get_group_member_list,
get_group_honor_info, get_stranger_info, get_status, get_version_info),
with bot.call_api(action, **params) or bot.<action>(**params). A group
or user outside the call's chat, or an action that sends, changes or
administers (set_group_card, set_group_ban, send_group_msg, ...), is
refused with an error saying so; in a chat of another platform, a call
raises NotAvailableError naming it."""
from __future__ import annotations

from typing import Any

from nekro_agent import _link, _unavailable

__all__ = ["Bot", "get_bot"]


def _run_platform() -> str:
    """The platform of the call's chat ("" outside a call or for a chat
    of no platform)."""
    ctx = _link.current_ctx.get()
    key = getattr(ctx, "from_chat_key", None) or ""
    platform, sep, _ = key.partition("-")
    return platform if sep else ""


async def query(action: str, params: dict) -> Any:
    """Ask the adapter of the call's chat one read-only action."""
    platform = _run_platform()
    if _link.current_call.get() == "" or _link.current_ctx.get() is None:
        _unavailable.fail("the OneBot v11 bot", "nekro answers its calls only inside a sandbox method or a command "
                                                "(for the chat of the call)")
    if platform != "onebot_v11":
        _unavailable.fail("the OneBot v11 bot", "the call's chat is %s, not a OneBot v11 chat" %
                          ("a %s chat" % platform if platform else "a chat of no platform"))
    return await _link.get().request("adapter.query", action=action, params=params)


class Bot:
    """nonebot's OneBot v11 Bot as plugins use it: read-only actions for
    the call's own chat."""

    type = "OneBot V11"
    adapter_key = "onebot_v11"

    async def call_api(self, api: str, **data: Any) -> Any:
        """One OneBot v11 action (read-only, for the call's chat)."""
        return await query(api, data)

    @property
    def self_id(self) -> str:
        _unavailable.fail("Bot.self_id", "ask `(await get_bot().get_login_info())['user_id']` or "
                                         "`(await _ctx.adapter.get_self_info()).user_id` instead")

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)

        async def action(**data: Any) -> Any:
            return await query(name, data)

        action.__name__ = name
        return action

    def __repr__(self) -> str:
        return "<OneBot v11 bot: read-only actions of the call's chat>"


def get_bot() -> Bot:
    """The OneBot v11 bot (its calls act for the call's chat)."""
    return Bot()
