"""Recurring (cron) timers, the reference's nekro_agent.api.recurring_timer:
importable; nekro's timer plugin keeps recurring timers, a Python plugin
cannot reach them yet."""
from nekro_agent import _unavailable

_WHY = "recurring timers are kept by nekro's timer plugin (nekro.timer), which Python plugins cannot reach yet"

__all__ = ["create_cron_job", "delete_job", "get_job", "get_job_id", "get_job_summary", "list_jobs", "pause_job",
           "resume_job", "run_now", "update_job", "validate_cron_expr", "validate_timezone"]

create_cron_job = _unavailable.function("create_cron_job", _WHY)
delete_job = _unavailable.function("delete_job", _WHY)
get_job = _unavailable.function("get_job", _WHY)
list_jobs = _unavailable.function("list_jobs", _WHY)
pause_job = _unavailable.function("pause_job", _WHY)
resume_job = _unavailable.function("resume_job", _WHY)
run_now = _unavailable.function("run_now", _WHY)
update_job = _unavailable.function("update_job", _WHY)
get_job_summary = _unavailable.function("get_job_summary", _WHY)


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
