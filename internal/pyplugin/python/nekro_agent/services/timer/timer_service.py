"""Timers that wake the AI in a chat (the reference's timer_service),
kept by the plugin's process.

A timer fires by pushing its description into its chat as a system
message that starts a turn, as the reference's do. They live in the
plugin's process: a restart of nekro or of the plugin forgets them (the
reference keeps its timers across restarts; nekro's own timer plugin
does too).
"""
from __future__ import annotations

import asyncio
import itertools
import time
from typing import Awaitable, Callable, Dict, List, Optional

__all__ = ["TimerTask", "timer_service"]


class TimerTask:
    def __init__(self, chat_key: str, trigger_time: int, event_desc: str, temporary: bool = False,
                 silent: bool = False, callback: Optional[Callable[[], Awaitable[None]]] = None):
        self.task_id = "t%d" % next(_ids)
        self.chat_key = chat_key
        self.trigger_time = int(trigger_time)
        self.event_desc = event_desc
        self.temporary = temporary
        self.silent = silent
        self.callback = callback
        self.handle: Optional[asyncio.TimerHandle] = None

    def __repr__(self) -> str:
        return "TimerTask(chat_key=%r, trigger_time=%d, event_desc=%r)" % (self.chat_key, self.trigger_time, self.event_desc)


_ids = itertools.count(1)


class TimerService:
    def __init__(self):
        self.timers: Dict[str, List[TimerTask]] = {}

    async def set_timer(self, chat_key: str, trigger_time: int, event_desc: str, silent: bool = False,
                        override: bool = False, temporary: Optional[bool] = None,
                        callback: Optional[Callable[[], Awaitable[None]]] = None) -> bool:
        """Set a timer; trigger_time < 0 clears the chat's timers (only the
        temporary ones with temporary=True, only the others with False).
        override makes it the chat's one temporary timer."""
        timers = self.timers.setdefault(chat_key, [])
        if trigger_time < 0:
            for t in [t for t in timers if temporary is None or t.temporary == temporary]:
                self._drop(t)
            return True
        if override:
            for t in [t for t in timers if t.temporary]:
                self._drop(t)
        t = TimerTask(chat_key, trigger_time, event_desc, temporary=bool(override or temporary), silent=silent,
                      callback=callback)
        loop = asyncio.get_running_loop()
        t.handle = loop.call_later(max(0.0, trigger_time - time.time()), lambda: loop.create_task(self._fire(t)))
        timers.append(t)
        return True

    def _drop(self, t: TimerTask) -> None:
        if t.handle is not None:
            t.handle.cancel()
        lst = self.timers.get(t.chat_key, [])
        if t in lst:
            lst.remove(t)

    async def _fire(self, t: TimerTask) -> None:
        self._drop(t)
        from nekro_agent.core.logger import logger

        try:
            if t.callback is not None:
                await t.callback()
                return
            from nekro_agent.api import message

            await message.push_system(t.chat_key, "[timer] %s" % t.event_desc, trigger_agent=not t.silent)
        except Exception:  # noqa: BLE001 - a timer's failure is logged, the process goes on
            logger.exception("timer for {} failed", t.chat_key)

    def get_timers(self, chat_key: str) -> List[TimerTask]:
        return list(self.timers.get(chat_key, []))

    async def delete_timer_by_id(self, task_id: str) -> bool:
        for lst in self.timers.values():
            for t in lst:
                if t.task_id == task_id:
                    self._drop(t)
                    return True
        return False


timer_service = TimerService()
