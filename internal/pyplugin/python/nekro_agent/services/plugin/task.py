"""The reference's asynchronous plugin tasks (mount_async_task): the
signals import; running such a task is not available yet."""
from __future__ import annotations

from enum import Enum
from typing import Any, Optional

from nekro_agent import _unavailable

__all__ = ["AsyncTaskHandle", "TaskCtl", "TaskRunner", "TaskSignal", "task"]

_WHY = "nekro does not run Python plugins' asynchronous tasks (mount_async_task) yet"


class TaskSignal(str, Enum):
    PROGRESS = "progress"
    SUCCESS = "success"
    FAIL = "fail"
    CANCEL = "cancel"


class TaskCtl:
    """What a task yields: progress, success, fail or cancel."""

    def __init__(self, signal: TaskSignal, message: str, data: Any = None, progress: Optional[int] = None):
        self.signal, self.message, self.data, self.progress = TaskSignal(signal), message, data, progress

    @classmethod
    def report_progress(cls, message: str, percent: Optional[int] = None) -> "TaskCtl":
        return cls(TaskSignal.PROGRESS, message, progress=percent)

    @classmethod
    def success(cls, message: str, data: Any = None) -> "TaskCtl":
        return cls(TaskSignal.SUCCESS, message, data=data, progress=100)

    @classmethod
    def fail(cls, message: str, error: Any = None) -> "TaskCtl":
        return cls(TaskSignal.FAIL, message, data=error)

    @classmethod
    def cancel(cls, message: str = "") -> "TaskCtl":
        return cls(TaskSignal.CANCEL, message)


class AsyncTaskHandle(_unavailable.Service):
    def __init__(self, *_a: Any, **_k: Any):
        super().__init__("AsyncTaskHandle", _WHY)


class TaskRunner(_unavailable.Service):
    def __init__(self, *_a: Any, **_k: Any):
        super().__init__("TaskRunner", _WHY)

    def register_task_type(self, task_type: str, func: Any) -> None:
        """Recorded by the plugin (mount_async_task); not run."""


task = _unavailable.Service("nekro_agent.api.plugin.task", _WHY)
