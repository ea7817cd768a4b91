"""core.logger and core.config."""
from __future__ import annotations

import logging

from nekro_agent import _link


class _ToNekro(logging.Handler):
    """Sends records to nekro's log (the operator's --log-level applies)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = self.format(record)
            link = _link.link
            if link is not None:
                link.send({"op": "log", "level": record.levelname.lower(), "msg": msg, "logger": record.name})
        except Exception:  # a log call never fails the plugin
            pass


logger = logging.getLogger("nekro_agent")
if not logger.handlers:
    logger.addHandler(_ToNekro())
    logger.setLevel(logging.DEBUG)
    logger.propagate = False


class _Config:
    """The few core settings a plugin reads."""

    def __getattr__(self, name):
        raise AttributeError("core.config.%s is not available in nekro" % name)


config = _Config()
