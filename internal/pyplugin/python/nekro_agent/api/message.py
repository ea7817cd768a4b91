"""Sending to a chat: text, images and files (sandbox paths or URLs)."""
from __future__ import annotations

from typing import Optional

from nekro_agent import _link


async def _send(kind: str, chat_key: str, payload: str, ctx, record: bool) -> None:
    from nekro_agent.api.schemas import _call_token

    token = _call_token(ctx) if ctx is not None else _link.current_call.get()
    if kind != "text":
        payload = _sandbox_path(payload, ctx if ctx is not None else _link.current_ctx.get())
    prev = _link.current_call.set(token)
    try:
        await _link.get().request("message.send", kind=kind, chat_key=chat_key, value=payload, record=record)
    finally:
        _link.current_call.reset(prev)


def _sandbox_path(path, ctx):
    """A file of the call's shared staging directory (fs.shared_path,
    get_file) as its sandbox path, written back first; anything else as
    given."""
    import os

    if ctx is None or getattr(ctx, "_stage", None) is None or not isinstance(path, (str, os.PathLike)):
        return path
    from nekro_agent.tools.file_system import _beneath

    p = os.path.normpath(os.path.abspath(os.fspath(path)))
    if _beneath(p, ctx._stage.root) is None:
        return os.fspath(path)
    return ctx.fs.forward_file(p)


async def send_text(chat_key: str, message: str, ctx=None, *, record: bool = True, ref_msg_id: Optional[str] = None) -> None:
    """Send text to the chat as the assistant. ref_msg_id (the message it
    answers, which the reference's platforms quote) is accepted and not
    used: nekro sends without quoting."""
    await _send("text", chat_key, message, ctx, record)


async def send_image(chat_key: str, image_path: str, ctx=None, *, record: bool = True, ref_msg_id: Optional[str] = None) -> None:
    await _send("image", chat_key, image_path, ctx, record)


async def send_file(chat_key: str, file_path: str, ctx=None, *, record: bool = True, ref_msg_id: Optional[str] = None) -> None:
    await _send("file", chat_key, file_path, ctx, record)


async def push_system(chat_key: str, message: str, ctx=None, trigger_agent: bool = False) -> None:
    """Add a system message to the chat, for the AI; with trigger_agent a
    turn answers it. Inside a sandbox method only the run's own chat."""
    from nekro_agent.api.schemas import _call_token

    token = _call_token(ctx) if ctx is not None else _link.current_call.get()
    prev = _link.current_call.set(token)
    try:
        await _link.get().request("message.push_system", chat_key=chat_key, text=message, trigger=bool(trigger_agent))
    finally:
        _link.current_call.reset(prev)


async def download_from_url(url: str, ctx) -> str:
    """Fetch url into the chat's uploads; returns the sandbox path."""
    return await ctx.fs.mixed_forward_file(url)


from nekro_agent.schemas.agent_message import AgentMessageSegment, AgentMessageSegmentType  # noqa: E402,F401
from nekro_agent.schemas.chat_message import ChatMessage  # noqa: E402,F401
