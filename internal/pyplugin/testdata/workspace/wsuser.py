"""A plugin using the reference's workspace, knowledge-base, memory, task and
Claude Code sandbox services with the imports and calls real built-ins use."""
import asyncio
import json

from nekro_agent.api.plugin import NekroPlugin, SandboxMethodType
from nekro_agent.api.schemas import AgentCtx
from nekro_agent.models.db_kb_asset_binding import DBKBAssetBinding
from nekro_agent.models.db_kb_chunk import DBKBChunk
from nekro_agent.models.db_workspace import DBWorkspace
from nekro_agent.services.kb.document_service import get_document, list_documents, read_normalized_content_async
from nekro_agent.services.kb.library_service import get_asset
from nekro_agent.services.kb.search_service import search_workspace_kb
from nekro_agent.services.memory.feature_flags import is_memory_system_enabled
from nekro_agent.services.memory.query_service import (
    MemoryObjectType,
    get_workspace_memory_detail,
    search_workspace_memories,
    trace_workspace_memory_origin,
)
from nekro_agent.services.plugin.task import AsyncTaskHandle, TaskCtl
from nekro_agent.services.plugin.task import task as task_api
from nekro_agent.services.workspace.client import CCSandboxClient
from nekro_agent.services.workspace.manager import WorkspaceService

plugin = NekroPlugin(name="Workspace user", module_name="wsuser", description="reads its chat's workspace",
                     version="1.0.0", author="tester", url="https://example.org")


async def _workspace(_ctx: AgentCtx):
    ws = await _ctx.get_bound_workspace()
    if ws is None:
        raise ValueError("no workspace")
    return ws


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "kb probe")
async def kb_probe(_ctx: AgentCtx, query: str, other_document: int = 0) -> str:
    """The chat's knowledge documents, a search, a document's text and chunk, and another chat's document."""
    ws = await _workspace(_ctx)
    docs = await list_documents(ws.id)
    out = {"workspace": ws.name, "same_id": ws.id == (await _ctx.get_bound_workspace()).id,
           "documents": sorted(d.file_name for d in docs),
           "categories": sorted(d.category or "-" for d in docs)}
    result = await search_workspace_kb(workspace_id=ws.id, query=query, limit=3, max_chunks_per_document=2)
    out["hits"] = [d.source_path for d in result.documents]
    first = result.documents[0]
    doc = await get_document(ws.id, first.document_id)
    out["status"] = doc.extract_status
    out["text"] = await read_normalized_content_async(doc)
    chunk = await DBKBChunk.get_or_none(id=first.snippets[0].chunk_id, workspace_id=ws.id)
    out["chunk_in_text"] = out["text"][chunk.char_start:chunk.char_end] == chunk.content
    out["asset"] = await get_asset(1)
    out["bound"] = await DBKBAssetBinding.filter(workspace_id=ws.id, asset_id=1).exists()
    out["other"] = await get_document(ws.id, other_document) if other_document else None
    try:
        WorkspaceService.resolve_kb_source_path(ws.id, doc.source_path)
    except Exception as e:  # noqa: BLE001
        out["source_file"] = "%s: %s" % (type(e).__name__, e)
    return json.dumps(out, ensure_ascii=False)


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "memory probe")
async def memory_probe(_ctx: AgentCtx, query: str, other_memory: int = 0) -> str:
    """The chat's memories for a query, one's detail and origin, and another chat's memory."""
    out = {"enabled": is_memory_system_enabled()}
    if not out["enabled"]:
        return json.dumps(out)
    ws = await _workspace(_ctx)
    found = await search_workspace_memories(workspace_id=ws.id, query=query, limit=5)
    out["found"] = [i.content_preview for i in found.items]
    if found.items:
        detail = await get_workspace_memory_detail(workspace_id=ws.id, memory_type=MemoryObjectType("paragraph"),
                                                   memory_id=found.items[0].target_id)
        out["detail"] = detail.content
        trace = await trace_workspace_memory_origin(workspace_id=ws.id, memory_type=MemoryObjectType.PARAGRAPH,
                                                    memory_id=found.items[0].target_id)
        out["origin"] = trace.origin_chat_key
    if other_memory:
        try:
            await get_workspace_memory_detail(workspace_id=ws.id, memory_type=MemoryObjectType.PARAGRAPH,
                                              memory_id=other_memory)
            out["other"] = "read"
        except ValueError as e:
            out["other"] = str(e)
    return json.dumps(out, ensure_ascii=False)


@plugin.mount_async_task("countdown")
async def countdown(handle: AsyncTaskHandle, n: int):
    yield TaskCtl.report_progress("waiting for go", percent=10)
    word = await handle.wait("go", timeout=30)
    yield TaskCtl.success("%s after %d" % (word, n), data=n)


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "task probe")
async def task_probe(_ctx: AgentCtx, step: str) -> str:
    """start, go, or state of this chat's countdown task."""
    tid = _ctx.chat_key
    if step == "start":
        await task_api.start("countdown", tid, _ctx.chat_key, plugin, 3)
        await asyncio.sleep(0.05)
    elif step == "go":
        task_api.get_handle("countdown", tid).notify("go", "lift-off")
        await asyncio.sleep(0.05)
    state = task_api.get_state("countdown", tid)
    return "%s running=%s %s %s" % (step, task_api.is_running("countdown", tid), state.signal.value, state.message)


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "sandbox probe")
async def sandbox_probe(_ctx: AgentCtx) -> str:
    """What the Claude Code sandbox's services say in nekro."""
    ws = await _workspace(_ctx)
    out = [ws.status]
    for f in (lambda: CCSandboxClient(ws).get_workspace_queue(workspace_id="default"),
              lambda: DBWorkspace.create(name="x")):
        try:
            await f()
            out.append("ok")
        except Exception as e:  # noqa: BLE001
            out.append("%s: %s" % (type(e).__name__, e))
    return "\n".join(out)


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "history prompt")
async def history_prompt(_ctx: AgentCtx, text: str) -> str:
    """Send text, then show the chat's newest message as the reference's history prompt does."""
    from nekro_agent.core.config import config
    from nekro_agent.models.db_chat_message import DBChatMessage

    await _ctx.send_text(text)
    newest = await DBChatMessage.filter(chat_key=_ctx.chat_key).order_by("-id").first()
    return newest.parse_chat_history_prompt("", config, ref_mode=True)


@plugin.mount_prompt_inject_method("workspace_catalog")
async def workspace_catalog(_ctx: AgentCtx) -> str:
    """The chat's knowledge documents, as kb_tools' prompt lists them."""
    ws = await _ctx.get_bound_workspace()
    docs = await list_documents(ws.id)
    return "KB catalog of %s: %s" % (ws.name, ", ".join(sorted(d.file_name for d in docs)))
