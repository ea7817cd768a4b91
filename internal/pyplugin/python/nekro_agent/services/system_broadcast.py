"""The reference's system event feed (for its web UI). nekro has no such
feed: events are accepted and dropped, as the reference drops them when
nobody listens."""
from __future__ import annotations

from typing import Any

__all__ = ["SystemEvent", "WorkspaceCcActiveEvent", "WorkspaceCcRuntimeStatusEvent", "publish_system_event"]


class SystemEvent:
    def __init__(self, **fields: Any):
        self.__dict__.update(fields)


class WorkspaceCcActiveEvent(SystemEvent):
    pass


class WorkspaceCcRuntimeStatusEvent(SystemEvent):
    pass


async def publish_system_event(event: Any) -> None:
    return None


def __getattr__(name: str):
    if name.endswith("Event"):
        return type(name, (SystemEvent,), {})
    raise AttributeError(name)
