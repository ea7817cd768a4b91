"""core.logger: the reference's loguru logger, over nekro's log.

Plugins call it as loguru is called: logger.info("text"),
logger.info("{} items", n) (str.format, as loguru formats),
logger.success(...), logger.exception(...) inside an except block,
logger.opt(exception=True).error(...), logger.bind(...), @logger.catch.
Each record is sent to nekro's log, where the operator's --log-level
applies; the plugin process writes nothing of its own.
"""
from __future__ import annotations

import functools
import logging
import sys
import traceback
from typing import Any, Optional

from nekro_agent import _link

__all__ = ["logger", "get_sub_logger", "Logger"]

# loguru's levels; TRACE is logged as debug, SUCCESS as info.
_LEVELS = {"TRACE": 5, "DEBUG": 10, "INFO": 20, "SUCCESS": 25, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}
_TO_NEKRO = {5: "debug", 10: "debug", 20: "info", 25: "info", 30: "warning", 40: "error", 50: "error"}
logging.addLevelName(25, "SUCCESS")
logging.addLevelName(5, "TRACE")


def _send(level: int, text: str, name: str) -> None:
    link = _link.link
    if link is None:  # outside a plugin host (a plugin imported by a test)
        sys.stderr.write("%s | %s | %s\n" % (logging.getLevelName(level), name, text))
        return
    try:
        lvl = _TO_NEKRO.get(level) or ("error" if level >= 40 else "warning" if level >= 30 else "info" if level >= 20 else "debug")
        link.send({"op": "log", "level": lvl, "msg": text, "logger": name})
    except Exception:  # a log call never fails the plugin
        pass


class Logger:
    """loguru's Logger, as far as plugins use it."""

    def __init__(self, name: str = "nekro_agent", extra: Optional[dict] = None, exception: Any = None):
        self._name = name
        self._extra = dict(extra or {})
        self._exception = exception

    def _log(self, level: int, message: Any, args: tuple, kwargs: dict, exception: Any = None) -> None:
        text = str(message)
        if args or kwargs:
            try:
                if args and not kwargs and "{" not in text and "%" in text:
                    text = text % args  # logging's style, which plugins also write
                else:
                    text = text.format(*args, **kwargs)
            except Exception:  # noqa: BLE001 - a bad format is logged as written
                text = "%s %r %r" % (text, args, kwargs)
        exc = exception if exception is not None else self._exception
        if exc:
            info = sys.exc_info() if exc is True else (type(exc), exc, exc.__traceback__) if isinstance(exc, BaseException) else exc
            if info and info[0] is not None:
                text += "\n" + "".join(traceback.format_exception(*info)).rstrip()
        if self._extra:
            text = "%s %s" % (text, " ".join("%s=%s" % kv for kv in self._extra.items()))
        _send(level, text, self._name)

    def trace(self, message: Any, *args: Any, **kwargs: Any) -> None:
        self._log(5, message, args, kwargs)

    def debug(self, message: Any, *args: Any, **kwargs: Any) -> None:
        self._log(10, message, args, kwargs)

    def info(self, message: Any, *args: Any, **kwargs: Any) -> None:
        self._log(20, message, args, kwargs)

    def success(self, message: Any, *args: Any, **kwargs: Any) -> None:
        self._log(25, message, args, kwargs)

    def warning(self, message: Any, *args: Any, **kwargs: Any) -> None:
        self._log(30, message, args, kwargs)

    warn = warning

    def error(self, message: Any, *args: Any, **kwargs: Any) -> None:
        self._log(40, message, args, kwargs)

    def critical(self, message: Any, *args: Any, **kwargs: Any) -> None:
        self._log(50, message, args, kwargs)

    def exception(self, message: Any, *args: Any, **kwargs: Any) -> None:
        """An error with the exception being handled."""
        self._log(40, message, args, kwargs, exception=True)

    def log(self, level: Any, message: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(level, str):
            level = _LEVELS.get(level.upper(), 20)
        self._log(int(level), message, args, kwargs)

    def opt(self, *, exception: Any = None, **_ignored: Any) -> "Logger":
        """loguru's opt(): exception= is kept; depth, colors, lazy... are
        accepted and have no effect."""
        return Logger(self._name, self._extra, exception)

    def bind(self, **extra: Any) -> "Logger":
        return Logger(self._name, {**self._extra, **extra}, self._exception)

    def patch(self, *_a: Any, **_k: Any) -> "Logger":
        return self

    def contextualize(self, **extra: Any):
        import contextlib

        return contextlib.nullcontext(self.bind(**extra))

    def catch(self, *args: Any, reraise: bool = False, message: str = "An error has been caught", **_k: Any):
        """loguru's catch: as a decorator or a context manager, logs an
        exception with its traceback (and re-raises it with reraise=True)."""
        outer = self

        class _Catcher:
            def __enter__(self):
                return self

            def __exit__(self, typ, value, tb):
                if typ is None or not issubclass(typ, Exception):
                    return False
                outer._log(40, message, (), {}, exception=value)
                return not reraise

            def __call__(self, func):
                if _is_coroutine_function(func):
                    @functools.wraps(func)
                    async def wrapped_async(*a, **k):
                        with _Catcher():
                            return await func(*a, **k)

                    return wrapped_async

                @functools.wraps(func)
                def wrapped(*a, **k):
                    with _Catcher():
                        return func(*a, **k)

                return wrapped

        if len(args) == 1 and callable(args[0]) and not isinstance(args[0], type):
            return _Catcher()(args[0])
        return _Catcher()

    # Sinks: nekro's log is the only one.
    def add(self, *_a: Any, **_k: Any) -> int:
        return 0

    def remove(self, *_a: Any, **_k: Any) -> None:
        return None

    def level(self, name: str, *_a: Any, **_k: Any):
        return name

    def disable(self, *_a: Any) -> None:
        return None

    def enable(self, *_a: Any) -> None:
        return None

    def __repr__(self) -> str:
        return "<nekro_agent logger %s>" % self._name


def _is_coroutine_function(f) -> bool:
    import inspect

    return inspect.iscoroutinefunction(f)


logger = Logger("nekro_agent")


def get_sub_logger(name: str, *_a: Any, **_k: Any) -> Logger:
    """A logger whose records are named nekro_agent.NAME."""
    return Logger("nekro_agent." + str(name))


class _ToNekro(logging.Handler):
    """Sends the standard logging module's records under "nekro_agent"
    (plugin.logger is one) to nekro's log."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            _send(record.levelno, self.format(record), record.name)
        except Exception:  # a log call never fails the plugin
            pass


_std = logging.getLogger("nekro_agent")
if not _std.handlers:
    _std.addHandler(_ToNekro())
    _std.setLevel(logging.DEBUG)
    _std.propagate = False
