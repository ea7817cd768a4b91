"""The reference's asynchronous plugin tasks (mount_async_task), run in the
plugin's own process as the reference runs them in its own.

A task function takes an AsyncTaskHandle and yields TaskCtl signals
(progress, then success, fail or cancel), or is a plain coroutine. task.start
runs it as an asyncio Task of the plugin's event loop; get_state answers
its latest signal (kept after it ended), is_running whether it still runs,
cancel stops it, and the handle's wait/notify let the task pause for a
signal from another call of the plugin. Tasks live in the plugin's process:
a restart of the plugin or of nekro ends them (as a restart of the
reference does).
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator as _AsyncGenerator
from enum import Enum
from typing import Any, Callable, Dict, List, Optional

__all__ = ["AsyncTaskHandle", "TaskAPI", "TaskCtl", "TaskRunner", "TaskSignal", "task"]


class TaskSignal(str, Enum):
    PROGRESS = "progress"
    SUCCESS = "success"
    FAIL = "fail"
    CANCEL = "cancel"


class TaskCtl:
    """What a task yields: progress, success, fail or cancel."""

    __slots__ = ("signal", "message", "data", "progress")

    def __init__(self, signal: TaskSignal, message: str, data: Any = None, progress: Optional[int] = None):
        if progress is not None and not 0 <= int(progress) <= 100:
            raise ValueError("progress must be 0 to 100, got %r" % progress)
        self.signal, self.message, self.data, self.progress = TaskSignal(signal), message, data, progress

    @classmethod
    def report_progress(cls, message: str, percent: int = 0) -> "TaskCtl":
        return cls(TaskSignal.PROGRESS, message, progress=percent)

    @classmethod
    def success(cls, message: str = "完成", data: Any = None) -> "TaskCtl":
        return cls(TaskSignal.SUCCESS, message, data=data)

    @classmethod
    def fail(cls, message: str, error: Any = None) -> "TaskCtl":
        return cls(TaskSignal.FAIL, message, data=error)

    @classmethod
    def cancel(cls, message: str = "已取消") -> "TaskCtl":
        return cls(TaskSignal.CANCEL, message)

    @property
    def is_terminal(self) -> bool:
        return self.signal in (TaskSignal.SUCCESS, TaskSignal.FAIL, TaskSignal.CANCEL)

    def __repr__(self) -> str:
        return "TaskCtl(signal=%s, message=%r, progress=%r)" % (self.signal.value, self.message, self.progress)


class AsyncTaskHandle:
    """A running task's handle: it waits for signals other calls send it
    (notify), and can tell the chat's agent something."""

    def __init__(self, task_id: str, chat_key: str, plugin: Any):
        self.task_id, self.chat_key, self.plugin = task_id, chat_key, plugin
        self._waiters: Dict[str, asyncio.Future] = {}
        self._cancelled = False

    async def wait(self, key: str, timeout: Optional[float] = None) -> Any:
        if self._cancelled:
            raise asyncio.CancelledError("Task has been cancelled")
        future = asyncio.get_running_loop().create_future()
        self._waiters[key] = future
        try:
            if timeout:
                return await asyncio.wait_for(future, timeout)
            return await future
        finally:
            self._waiters.pop(key, None)

    def notify(self, key: str, data: Any = None) -> bool:
        future = self._waiters.get(key)
        if future is not None and not future.done():
            future.set_result(data)
            return True
        return False

    def cancel_wait(self, key: str) -> bool:
        future = self._waiters.get(key)
        if future is not None and not future.done():
            future.cancel()
            return True
        return False

    def cancel_all(self) -> int:
        self._cancelled = True
        n = 0
        for future in self._waiters.values():
            if not future.done():
                future.cancel()
                n += 1
        return n

    async def notify_agent(self, message: str, trigger: bool = True) -> None:
        from nekro_agent.services.message_service import message_service

        await message_service.push_system_message(chat_key=self.chat_key, agent_messages=message, trigger_agent=trigger)

    @property
    def is_cancelled(self) -> bool:
        return self._cancelled


class TaskRunner:
    """The process's tasks, by "TYPE:ID" (one runner per process, as the
    reference's singleton)."""

    _instance: Optional["TaskRunner"] = None

    def __new__(cls) -> "TaskRunner":
        if cls._instance is None:
            inst = super().__new__(cls)
            inst._handles, inst._tasks, inst._states = {}, {}, {}
            inst._funcs, inst._terminal = {}, {}
            cls._instance = inst
        return cls._instance

    def register_task_type(self, task_type: str, func: Callable) -> None:
        self._funcs[task_type] = func

    async def start(self, task_type: str, task_id: str, chat_key: str, plugin: Any, *args: Any,
                    on_terminal: Optional[Callable[[TaskCtl], None]] = None, **kwargs: Any) -> AsyncTaskHandle:
        key = "%s:%s" % (task_type, task_id)
        old = self._tasks.get(key)
        if old is not None:
            if not old.done():
                raise ValueError("任务 %s 已在运行中 (task %s is running)" % (key, key))
            for d in (self._tasks, self._handles, self._states, self._terminal):
                d.pop(key, None)
        func = self._funcs.get(task_type)
        if func is None and plugin is not None:
            func = getattr(plugin, "async_tasks", {}).get(task_type)
        if func is None:
            raise ValueError("未注册的任务类型: %s (no task type %s)" % (task_type, task_type))
        handle = AsyncTaskHandle(task_id, chat_key, plugin)
        self._handles[key] = handle
        if on_terminal is not None:
            self._terminal[key] = on_terminal
        self._tasks[key] = asyncio.get_running_loop().create_task(self._execute(key, func, handle, *args, **kwargs))
        return handle

    def get_handle(self, task_type: str, task_id: str) -> Optional[AsyncTaskHandle]:
        return self._handles.get("%s:%s" % (task_type, task_id))

    def get_state(self, task_type: str, task_id: str) -> Optional[TaskCtl]:
        return self._states.get("%s:%s" % (task_type, task_id))

    def is_running(self, task_type: str, task_id: str) -> bool:
        t = self._tasks.get("%s:%s" % (task_type, task_id))
        return t is not None and not t.done()

    async def cancel(self, task_type: str, task_id: str) -> bool:
        key = "%s:%s" % (task_type, task_id)
        t = self._tasks.get(key)
        if t is None or t.done():
            return False
        handle = self._handles.get(key)
        if handle is not None:
            handle.cancel_all()
        t.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(t), timeout=5)
        except (asyncio.CancelledError, asyncio.TimeoutError, Exception):  # noqa: BLE001 - it ended, one way or another
            pass
        return True

    async def stop_all(self) -> int:
        n = 0
        for key in list(self._tasks):
            task_type, task_id = key.split(":", 1)
            if await self.cancel(task_type, task_id):
                n += 1
        return n

    def get_running_tasks(self) -> List[str]:
        return [k for k, t in self._tasks.items() if not t.done()]

    async def _execute(self, key: str, func: Callable, handle: AsyncTaskHandle, *args: Any, **kwargs: Any) -> None:
        from nekro_agent.core.logger import logger

        final: Optional[TaskCtl] = None
        try:
            result = func(handle, *args, **kwargs)
            if isinstance(result, _AsyncGenerator):
                async for ctl in result:
                    self._states[key] = ctl
                    if ctl.is_terminal:
                        final = ctl
                        break
            else:
                await result
                final = self._states[key] = TaskCtl.success("完成")
        except asyncio.CancelledError:
            final = self._states[key] = TaskCtl.cancel("任务被取消")
        except Exception as e:  # noqa: BLE001 - the task's failure is its state
            final = self._states[key] = TaskCtl.fail(str(e), error=e)
            logger.exception("asynchronous task {} failed", key)
        finally:
            callback = self._terminal.pop(key, None)
            if final is not None and callback is not None:
                try:
                    callback(final)
                except Exception as e:  # noqa: BLE001
                    logger.warning("the terminal callback of task {} failed: {}", key, e)
            self._handles.pop(key, None)
            self._tasks.pop(key, None)


class TaskAPI:
    """The reference's `task`: TaskRunner's methods."""

    @staticmethod
    def runner() -> TaskRunner:
        return TaskRunner()

    @staticmethod
    async def start(task_type: str, task_id: str, chat_key: str, plugin: Any, *args: Any,
                    on_terminal: Optional[Callable[[TaskCtl], None]] = None, **kwargs: Any) -> AsyncTaskHandle:
        return await TaskRunner().start(task_type, task_id, chat_key, plugin, *args, on_terminal=on_terminal, **kwargs)

    @staticmethod
    def get_handle(task_type: str, task_id: str) -> Optional[AsyncTaskHandle]:
        return TaskRunner().get_handle(task_type, task_id)

    @staticmethod
    def get_state(task_type: str, task_id: str) -> Optional[TaskCtl]:
        return TaskRunner().get_state(task_type, task_id)

    @staticmethod
    def is_running(task_type: str, task_id: str) -> bool:
        return TaskRunner().is_running(task_type, task_id)

    @staticmethod
    async def cancel(task_type: str, task_id: str) -> bool:
        return await TaskRunner().cancel(task_type, task_id)

    @staticmethod
    async def stop_all() -> int:
        return await TaskRunner().stop_all()

    @staticmethod
    def get_running_tasks() -> List[str]:
        return TaskRunner().get_running_tasks()


task = TaskAPI()
