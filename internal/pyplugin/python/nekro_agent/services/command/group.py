"""CommandGroup: subcommands under one name: `/group.sub`, its aliases
`/group.alias`."""
from __future__ import annotations

from typing import Any, Callable, List, Optional

__all__ = ["CommandGroup"]


class CommandGroup:
    def __init__(self, name: str, description: str, permission: Any = None, category: str = "plugin",
                 tags: Optional[List[str]] = None, plugin: Any = None):
        self.name = name
        self.description = description
        self.permission = permission
        self.category = category
        self.tags = tags or []
        self._plugin = plugin
        self.commands: list = []

    def command(self, name: str, description: str, aliases: Optional[List[str]] = None, permission: Any = None,
                usage: str = "", **meta: Any) -> Callable[[Callable], Callable]:
        def deco(func: Callable) -> Callable:
            full = "%s.%s" % (self.name, name)
            self.commands.append(full)
            if self._plugin is not None:
                meta["category"] = meta.get("category") or self.category
                meta["tags"] = meta.get("tags") or self.tags
                self._plugin._record_command(full, func, description=description,
                                             aliases=["%s.%s" % (self.name, a) for a in (aliases or [])],
                                             permission=permission or self.permission, usage=usage or full, **meta)
            return func

        return deco
