"""Recurring (cron) timers, the reference's nekro_agent.api.recurring_timer,
on nekro's timer system.

A job is a timer of the plugin in nekro's database: it outlives the
plugin's process and nekro's restarts, and `nekro serve` fires it (under
--timer-turns-per-hour, as every plugin's timers) by pushing its text to
its chat and waking the agent. Inside a sandbox method or a command a
plugin keeps jobs in its call's chat only. A job id alone (get_job,
delete_job, ...) is looked up in the chats this process has seen the job
in, else in the call's chat.

Not available: the workday modes that need China's holiday calendar
(cn_workday, cn_restday); the run history (last_run_at, last_error).
"""
from __future__ import annotations

import datetime
import json
from typing import Dict, List, Optional, Tuple

from nekro_agent import _link, _unavailable
from nekro_agent.models.db_recurring_timer_job import DBRecurringTimerJob

__all__ = ["create_cron_job", "delete_job", "get_job", "get_job_id", "get_job_summary", "list_jobs", "pause_job",
           "resume_job", "run_now", "update_job", "validate_cron_expr", "validate_timezone"]

_WORKDAY_MODES = ("none", "mon_fri", "weekend")
# The chat of each job id this process created or listed.
_chats: Dict[str, str] = {}


def get_job_id(job) -> str:
    return job.job_id


def validate_timezone(timezone: str) -> None:
    from zoneinfo import ZoneInfo

    ZoneInfo(timezone)


def validate_cron_expr(cron_expr: str, base_dt=None) -> None:
    if not cron_expr.strip():
        raise ValueError("cron_expr must not be empty")
    if len(cron_expr.split()) != 5:
        raise ValueError("cron_expr must have 5 fields (minute hour day month weekday): %r" % cron_expr)


def _workday(mode: Optional[str]) -> str:
    mode = (mode or "none").strip() or "none"
    if mode in ("cn_workday", "cn_restday"):
        _unavailable.fail("workday_mode %s" % mode, "it needs China's holiday calendar, which nekro does not carry "
                                                     "(use none, mon_fri or weekend)")
    if mode not in _WORKDAY_MODES:
        raise ValueError("workday_mode must be none, mon_fri or weekend, not %r" % mode)
    return mode


def _payload(desc: str, title: str, workday: str, paused: bool) -> str:
    return json.dumps({"desc": desc, "title": title, "workday": workday, "paused": paused}, ensure_ascii=False)


def _job(chat_key: str, row: dict) -> DBRecurringTimerJob:
    try:
        p = json.loads(row.get("payload") or "{}")
    except ValueError:
        p = {"desc": row.get("payload") or ""}
    due = datetime.datetime.fromtimestamp(row.get("due") or 0, datetime.timezone.utc)
    _chats[row["id"]] = chat_key
    return DBRecurringTimerJob(
        id=row["id"], job_id=row["id"], chat_key=chat_key, title=p.get("title") or "", event_desc=p.get("desc") or "",
        cron_expr=row.get("cron") or "", timezone=row.get("tz") or "", workday_mode=p.get("workday") or "none",
        status="paused" if p.get("paused") else "active", next_run_at=due, last_run_at=None, last_success_at=None,
        last_error=None, create_time=None, update_time=None)


async def _rows(chat_key: str) -> List[dict]:
    return [r for r in await _link.get().request("timer.list", chat_key=chat_key) or [] if r.get("cron")]


def _chat_of(job_id: str) -> str:
    from nekro_agent.models._base import own_chat_key

    chat = _chats.get(job_id) or own_chat_key()
    if not chat:
        raise ValueError("定时任务不存在: %s (no chat known for it outside a call)" % job_id)
    return chat


async def _set(chat_key: str, job_id: str, cron: str, tz: str, payload: str) -> str:
    return await _link.get().request("timer.set", chat_key=chat_key, id=job_id, at=0, cron=cron, tz=tz, payload=payload)


async def create_cron_job(chat_key: str, cron_expr: str, event_desc: str, timezone: str, workday_mode: str = "none",
                          title: Optional[str] = None) -> DBRecurringTimerJob:
    """Create a recurring job in chat_key: at every occurrence of
    cron_expr (5 fields) in timezone its event_desc wakes the agent."""
    validate_timezone(timezone)
    validate_cron_expr(cron_expr)
    mode = _workday(workday_mode)
    job_id = await _set(chat_key, "", cron_expr.strip(), timezone, _payload(event_desc, (title or "").strip(), mode, False))
    return await get_job(job_id, chat_key=chat_key)


async def get_job(job_id: str, *, chat_key: Optional[str] = None) -> DBRecurringTimerJob:
    job_id = (job_id or "").strip()
    chat = chat_key or _chat_of(job_id)
    for r in await _rows(chat):
        if r["id"] == job_id:
            return _job(chat, r)
    raise ValueError("定时任务不存在: %s" % job_id)


async def update_job(job_id: str, *, cron_expr: Optional[str] = None, event_desc: Optional[str] = None,
                     timezone: Optional[str] = None, workday_mode: Optional[str] = None,
                     title: Optional[str] = None) -> DBRecurringTimerJob:
    job = await get_job(job_id)
    if cron_expr is not None:
        validate_cron_expr(cron_expr)
        job.cron_expr = cron_expr.strip()
    if timezone is not None:
        validate_timezone(timezone)
        job.timezone = timezone
    if workday_mode is not None:
        job.workday_mode = _workday(workday_mode)
    if event_desc is not None:
        job.event_desc = event_desc
    if title is not None:
        job.title = title.strip()
    return await _save(job, job.status == "paused")


async def _save(job: DBRecurringTimerJob, paused: bool) -> DBRecurringTimerJob:
    await _set(job.chat_key, job.job_id, job.cron_expr, job.timezone,
               _payload(job.event_desc, job.title, job.workday_mode, paused))
    return await get_job(job.job_id, chat_key=job.chat_key)


async def delete_job(job_id: str) -> None:
    job_id = (job_id or "").strip()
    await _link.get().request("timer.clear", chat_key=_chat_of(job_id), id=job_id)
    _chats.pop(job_id, None)


async def pause_job(job_id: str) -> DBRecurringTimerJob:
    return await _save(await get_job(job_id), True)


async def resume_job(job_id: str) -> DBRecurringTimerJob:
    return await _save(await get_job(job_id), False)


async def run_now(job_id: str) -> bool:
    """Fire the job once now: its text wakes its chat's agent."""
    from nekro_agent.api import message

    job = await get_job(job_id)
    text = "⏰ 定时提醒：" + (job.title + "\n" if job.title else "") + job.event_desc
    await message.push_system(job.chat_key, text, trigger_agent=True)
    return True


async def list_jobs(chat_key: str, status: Optional[str] = None, limit: int = 50) -> List[DBRecurringTimerJob]:
    jobs = [_job(chat_key, r) for r in await _rows(chat_key)]
    if status:
        jobs = [j for j in jobs if j.status == status]
    return jobs[:limit] if limit and limit > 0 else jobs


async def get_job_summary(chat_key: str, upcoming_limit: int,
                          recent_limit: int) -> Tuple[int, int, List[DBRecurringTimerJob], List[DBRecurringTimerJob]]:
    """(total, active, the next upcoming_limit active jobs, the
    recent_limit last run: always empty, nekro keeps no run history)."""
    jobs = await list_jobs(chat_key)
    active = sorted((j for j in jobs if j.status == "active"), key=lambda j: j.next_run_at)
    return len(jobs), len(active), active[:upcoming_limit], []
