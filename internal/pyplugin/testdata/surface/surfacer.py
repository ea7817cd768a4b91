"""A plugin written to the reference's API the way real Nekro Agent
plugins use it: the re-export paths, core.logger/config, i18n, MsgSignal
at schemas.signal, AgentCtx's platform fields, mount_command, httpx."""
import asyncio

from nekro_agent.api import core, i18n
from nekro_agent.api import recurring_timer as rt
from nekro_agent.api.plugin import Arg, CmdCtl, CommandExecutionContext, CommandPermission, CommandResponse
from nekro_agent.api.schemas import AgentCtx
from nekro_agent.core import config as core_config
from nekro_agent.core import logger
from nekro_agent.core.logger import get_sub_logger
from nekro_agent.models.db_chat_channel import DBChatChannel
from nekro_agent.models.db_chat_message import DBChatMessage
from nekro_agent.schemas.chat_message import ChatType
from nekro_agent.schemas.signal import MsgSignal
from nekro_agent.services.plugin.base import ConfigBase, NekroPlugin, SandboxMethodType

plugin = NekroPlugin(
    name="Surface",
    module_name="surfacer",
    description="uses what real plugins import",
    version="1.0.0",
    author="tester",
    url="",
    i18n_name=i18n.i18n_text(zh_CN="表面", en_US="Surface"),
)
sub = get_sub_logger("surfacer")


@plugin.mount_config()
class SurfaceConfig(ConfigBase):
    GREETING: str = "hi"


@plugin.mount_command(name="surf", description="a command", permission=CommandPermission.PUBLIC)
async def surf(context: CommandExecutionContext, what: str = Arg("what", default="x", positional=True)) -> CommandResponse:
    return CmdCtl.success("surf " + what)


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="context")
async def where_am_i(_ctx: AgentCtx) -> dict:
    logger.warning("where_am_i in {}", _ctx.chat_key)
    sub.success("sub logger works")
    channel = await DBChatChannel.get_channel(chat_key=_ctx.chat_key)
    mine = await DBChatChannel.filter(is_active=True).all()
    try:
        await DBChatMessage.filter(chat_key=_ctx.chat_key).limit(1)
        history = "answered"
    except Exception as e:  # noqa: BLE001
        history = type(e).__name__
    return {
        "adapter_key": _ctx.adapter_key, "channel_id": _ctx.channel_id, "channel_type": _ctx.channel_type,
        "chat_key": _ctx.chat_key, "from_user_id": _ctx.from_user_id,
        "group": channel.chat_type == ChatType.GROUP, "visible_chats": [c.chat_key for c in mine],
        "history": history, "context_len": core_config.AI_CHAT_CONTEXT_MAX_LENGTH,
        "greeting": plugin.get_config(SurfaceConfig).GREETING,
        "signal": MsgSignal.CONTINUE.name, "name_en": plugin.i18n_name["en-US"],
        "commands": [c[0] for c in plugin.commands],
    }


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="fetch")
async def fetch(_ctx: AgentCtx, url: str) -> dict:
    import httpx  # anyio's: refuses to run outside an asyncio Task

    task = asyncio.current_task()
    # asyncio.timeout first: Debian's anyio 3.6 (under its httpx) leaves
    # the task's cancellation count raised after a request, which breaks
    # a later asyncio.timeout in the same task (fixed in anyio 4).
    timed_out = False
    try:
        async with asyncio.timeout(0.05):
            await asyncio.sleep(5)
    except TimeoutError:
        timed_out = True
    async with httpx.AsyncClient() as client:
        r = await client.get(url)
    return {"status": r.status_code, "body": r.text, "in_task": task is not None, "timeout_works": timed_out}


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="qdrant")
async def use_qdrant(_ctx: AgentCtx) -> str:
    try:
        await core.get_qdrant_client()
    except Exception as e:  # noqa: BLE001
        return "%s: %s" % (type(e).__name__, e)
    return "no error"


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="note")
async def note(_ctx: AgentCtx, text: str) -> str:
    await _ctx.push_system(text)
    return "noted"


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="messages")
async def messages(_ctx: AgentCtx, other: str) -> dict:
    """The chat's stored messages as the reference's plugins query them."""
    newest = await DBChatMessage.filter(chat_key=_ctx.chat_key).order_by("-id").limit(2)
    since = await DBChatMessage.filter(send_timestamp__gte=0).count()
    return {"newest": [(m.content_text, m.sender_id, m.chat_key, m.chat_type) for m in newest],
            "unfiltered": [m.content_text for m in await DBChatMessage.all()], "since": since,
            "other": await DBChatMessage.filter(chat_key=other).count()}


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "cron_demo")
async def cron_demo(_ctx: AgentCtx, other: str) -> dict:
    """A recurring job's life as the reference's plugins drive it."""
    job = await rt.create_cron_job(_ctx.chat_key, "30 8 * * *", "morning news", "Asia/Shanghai", title="News")
    jid = rt.get_job_id(job)
    paused = await rt.pause_job(jid)
    updated = await rt.update_job(jid, cron_expr="0 9 * * 1-5", workday_mode="mon_fri")
    listed = await rt.list_jobs(_ctx.chat_key)
    total, active, upcoming, recent = await rt.get_job_summary(_ctx.chat_key, 5, 5)
    resumed = await rt.resume_job(jid)
    try:
        await rt.create_cron_job(other, "* * * * *", "x", "UTC")
        elsewhere = "created"
    except Exception as e:  # noqa: BLE001
        elsewhere = type(e).__name__
    try:
        await rt.create_cron_job(_ctx.chat_key, "* * * * *", "x", "UTC", workday_mode="cn_workday")
        cn = "created"
    except Exception as e:  # noqa: BLE001
        cn = type(e).__name__
    await rt.delete_job(jid)
    after = await rt.list_jobs(_ctx.chat_key)
    return {"title": job.title, "desc": job.event_desc, "status": [job.status, paused.status, updated.status, resumed.status],
            "cron": updated.cron_expr, "mode": updated.workday_mode, "tz": job.timezone, "listed": [j.job_id == jid for j in listed],
            "summary": [total, active, len(upcoming), len(recent)], "next_hour": resumed.next_run_at.hour,
            "elsewhere": elsewhere, "cn": cn, "after": len(after)}
