"""A Python plugin written to the documents' API, for nekro's tests."""
import asyncio
import json
import os

from nekro_agent.api import core
from nekro_agent.api.plugin import NekroPlugin, SandboxMethodType
from nekro_agent.api.schemas import AgentCtx

plugin = NekroPlugin(
    name="Python notes",
    module_name="pynotes",
    description="Notes kept by a Python plugin",
    version="1.0.0",
    author="tester",
    url="https://example.org",
)


@plugin.mount_init_method()
async def init_plugin():
    (plugin.get_plugin_data_dir() / "init.txt").write_text("initialized")
    await plugin.store.set(store_key="inits", value=str(int(await plugin.store.get(store_key="inits") or 0) + 1))


@plugin.mount_cleanup_method()
async def cleanup():
    await plugin.store.set(store_key="cleaned", value="yes")


@plugin.mount_on_channel_reset()
async def on_reset(_ctx: AgentCtx):
    await plugin.store.delete(chat_key=_ctx.from_chat_key, store_key="note")


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "保存笔记", "Save a note for this chat")
async def save_note(_ctx: AgentCtx, text: str, tags: list = None) -> int:
    """Save a note in this chat.

    Args:
        text (str): the note.
        tags (list): optional tags.

    Returns:
        int: 0 when the note is new, 1 when it replaced one.
    """
    core.logger.info("saving a note in %s", _ctx.chat_key)
    return await plugin.store.set(chat_key=_ctx.chat_key, store_key="note",
                                  value=json.dumps({"text": text, "tags": tags or [], "user": _ctx.from_user_id}))


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "read_note")
async def read_note(_ctx: AgentCtx) -> dict:
    """Return this chat's note, or None."""
    raw = await plugin.store.get(chat_key=_ctx.chat_key, store_key="note")
    return json.loads(raw) if raw else None


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "count_bytes")
def count_bytes(_ctx: AgentCtx, data: bytes) -> int:
    """A plain (not async) method taking bytes."""
    return len(data)


@plugin.mount_sandbox_method(SandboxMethodType.BEHAVIOR, "announce")
async def announce(_ctx: AgentCtx, text: str) -> str:
    """Send text to the chat and say so."""
    await _ctx.send_text(text)
    return "sent: " + text


@plugin.mount_sandbox_method(SandboxMethodType.AGENT, "ask_model")
async def ask_model(_ctx: AgentCtx, question: str) -> str:
    """End the run; the model gets the answer."""
    return "the answer to %r is 42" % question


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "explode")
async def explode(_ctx: AgentCtx) -> str:
    """Raise an error."""
    raise RuntimeError("boom from python")


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "hang")
async def hang(_ctx: AgentCtx) -> str:
    """Never answer."""
    await asyncio.sleep(3600)
    return "late"


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "die")
def die(_ctx: AgentCtx) -> str:
    """Kill the plugin's own process."""
    os._exit(3)


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "slow")
async def slow(_ctx: AgentCtx, seconds: float = 0.5) -> float:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return seconds


from nekro_agent.tools.path_convertor import (  # noqa: E402 (as the documents import it)
    convert_filename_to_access_path,
    convert_filename_to_container_path,
    convert_to_host_path,
)


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "read_upload")
async def read_upload(_ctx: AgentCtx, path: str) -> str:
    """Read a file the sandbox names, both ways the documents show."""
    a = convert_to_host_path(path, _ctx.from_chat_key).read_text()
    b = _ctx.fs.get_file(path).read_text()
    return a if a == b else "MISMATCH"


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "write_report")
async def write_report(_ctx: AgentCtx, text: str) -> str:
    """Write a report into the chat's uploads; return its sandbox path."""
    host = convert_filename_to_access_path("report.txt", _ctx.from_chat_key)
    host.write_text(text)
    return str(convert_filename_to_container_path("report.txt"))


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "share_bytes")
async def share_bytes(_ctx: AgentCtx, data: bytes, name: str) -> str:
    """Put bytes into /app/shared; return its sandbox path."""
    return await _ctx.fs.mixed_forward_file(data, name)


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "forward_shared")
async def forward_shared(_ctx: AgentCtx, name: str) -> str:
    """Write a file into the shared dir on the host and forward it."""
    p = _ctx.fs.shared_path / name
    p.write_text("from the plugin")
    return _ctx.fs.forward_file(p)


@plugin.mount_prompt_inject_method("note", "This chat's note")
async def inject_note(_ctx: AgentCtx) -> str:
    raw = await plugin.store.get(chat_key=_ctx.from_chat_key, store_key="note")
    return "The chat's note: %s" % json.loads(raw)["text"] if raw else ""


@plugin.mount_collect_methods()
async def collect(_ctx: AgentCtx):
    """In chat "quiet" the AI may only read the note."""
    if _ctx.from_chat_key == "quiet":
        return [read_note]
    return [f for f, _t, _n, _d in plugin.sandbox_methods]


from nekro_agent.api.signal import MsgSignal
from nekro_agent.schemas.chat_message import ChatMessage


@plugin.mount_on_user_message()
async def screen(_ctx: AgentCtx, message: ChatMessage):
    """Drop messages that shout SPAM; keep "fyi ..." without a turn."""
    if "SPAM" in message.content_text:
        return MsgSignal.BLOCK_ALL
    if message.content_text.startswith("fyi"):
        return MsgSignal.BLOCK_TRIGGER
    return None


@plugin.mount_on_system_message()
async def screen_system(_ctx: AgentCtx, message: str):
    """Drop the notes about similar messages."""
    return MsgSignal.BLOCK_ALL if "too similar" in message else None


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "nudge")
async def nudge(_ctx: AgentCtx, text: str) -> str:
    """Push a system message that wakes the agent."""
    from nekro_agent.api.message import push_system

    await push_system(_ctx.from_chat_key, text, _ctx, trigger_agent=True)
    return "nudged"
