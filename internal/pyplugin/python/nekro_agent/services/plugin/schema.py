"""SandboxMethodType and the method records (the reference's
nekro_agent.services.plugin.schema)."""
from __future__ import annotations

from typing import Any, Callable, Optional

from nekro_agent.api.plugin import SandboxMethodType

__all__ = ["PromptInjectMethod", "SandboxMethod", "SandboxMethodType", "WebhookMethod"]


class SandboxMethod:
    def __init__(self, method_type: SandboxMethodType, name: str, description: str, func: Callable):
        self.method_type, self.name, self.description, self.func = SandboxMethodType(method_type), name, description, func


class PromptInjectMethod:
    def __init__(self, func: Callable, name: str = "", description: str = ""):
        self.func, self.name, self.description = func, name, description


class WebhookMethod:
    def __init__(self, func: Callable, name: str, endpoint: str, description: str = "", plugin: Optional[Any] = None):
        self.func, self.name, self.endpoint, self.description, self.plugin = func, name, endpoint, description, plugin
