"""core.logger and core.config."""
from __future__ import annotations

import logging

from nekro_agent import _link

# The reference's core.logger is loguru's, whose success() the documents
# call (core.logger.success(...)); here it is a level between INFO and
# WARNING that nekro logs as info.
SUCCESS = 25
logging.addLevelName(SUCCESS, "SUCCESS")


class _ToNekro(logging.Handler):
    """Sends records to nekro's log (the operator's --log-level applies)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = self.format(record)
            link = _link.link
            if link is not None:
                level = "info" if record.levelno == SUCCESS else record.levelname.lower()
                link.send({"op": "log", "level": level, "msg": msg, "logger": record.name})
        except Exception:  # a log call never fails the plugin
            pass


logger = logging.getLogger("nekro_agent")
if not logger.handlers:
    logger.addHandler(_ToNekro())
    logger.setLevel(logging.DEBUG)
    logger.propagate = False


def _success(msg, *args, **kwargs) -> None:
    """loguru's logger.success: a successful step, logged as info."""
    if logger.isEnabledFor(SUCCESS):
        kwargs.setdefault("stacklevel", 2)
        logger._log(SUCCESS, msg, args, **kwargs)


logger.success = _success


class _Config:
    """The few core settings a plugin reads."""

    def __getattr__(self, name):
        raise AttributeError("core.config.%s is not available in nekro" % name)


config = _Config()
