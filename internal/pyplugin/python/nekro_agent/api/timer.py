"""Timers (the reference's nekro_agent.api.timer), kept by the plugin's
process (see nekro_agent.services.timer.timer_service)."""
from typing import List, Optional

from nekro_agent.services.timer.timer_service import TimerTask, timer_service

__all__ = ["clear_timers", "get_timers", "set_temp_timer", "set_timer"]


async def set_timer(chat_key: str, trigger_time: int, event_desc: str) -> bool:
    return await timer_service.set_timer(chat_key, trigger_time, event_desc, override=False)


async def set_temp_timer(chat_key: str, trigger_time: int, event_desc: str) -> bool:
    return await timer_service.set_timer(chat_key, trigger_time, event_desc, override=True)


async def clear_timers(chat_key: str, temporary: Optional[bool] = None) -> bool:
    return await timer_service.set_timer(chat_key, -1, "", temporary=temporary)


async def get_timers(chat_key: str) -> List[TimerTask]:
    return timer_service.get_timers(chat_key)
