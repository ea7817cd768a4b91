"""The reference's client of a workspace's Claude Code sandbox: nekro runs
none, so every call raises NotAvailableError (CCSandboxError is still the
class plugins catch)."""
from __future__ import annotations

from typing import Any

from nekro_agent import _unavailable

__all__ = ["CCSandboxClient", "CCSandboxError"]

_WHY = "nekro runs no Claude Code sandbox (a chat's workspace is its knowledge base and memories)"


class CCSandboxError(Exception):
    """A failure of the Claude Code sandbox."""


class CCSandboxClient(_unavailable.Service):
    def __init__(self, workspace: Any = None, *_a: Any, **_k: Any):
        super().__init__("CCSandboxClient", _WHY, workspace=workspace)
