"""The API plugins import: core, i18n, message, plugin, schemas, signal,
timer (as the reference's nekro_agent.api)."""
from nekro_agent.api import core, i18n, message, plugin, schemas, signal, timer  # noqa: F401

__all__ = ["core", "i18n", "message", "plugin", "schemas", "signal", "timer"]
