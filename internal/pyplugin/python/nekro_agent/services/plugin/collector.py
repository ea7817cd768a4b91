"""The reference's plugin collector: other plugins live in processes of
their own in nekro, so a plugin sees only itself."""
from typing import Any, Optional

from nekro_agent import _unavailable

_WHY = "each Python plugin runs in a process of its own; another plugin's object is not reachable"


class _Collector(_unavailable.Service):
    def __init__(self):
        super().__init__("plugin_collector", _WHY)

    def get_plugin_by_module_name(self, module_name: str) -> Optional[Any]:
        from nekro_agent.api import plugin as _api

        own = _api._current_plugin
        if own is not None and module_name in (own.module_name, own.key):
            return own
        return None

    def get_plugin(self, key: str) -> Optional[Any]:
        return self.get_plugin_by_module_name(key)

    def get_all_plugins(self) -> list:
        from nekro_agent.api import plugin as _api

        return [_api._current_plugin] if _api._current_plugin is not None else []


plugin_collector = _Collector()

__all__ = ["plugin_collector"]
