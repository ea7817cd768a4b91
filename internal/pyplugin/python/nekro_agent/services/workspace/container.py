"""The reference's manager of Claude Code sandbox containers: nekro runs
none (its own sandboxes run the AI's code, docs/sandbox.md)."""
from __future__ import annotations

from nekro_agent import _unavailable

__all__ = ["SandboxContainerManager"]


class SandboxContainerManager(metaclass=_unavailable.ServiceClass):
    _what = "SandboxContainerManager"
    _why = "nekro runs no Claude Code sandbox containers (its own sandboxes run the AI's code)"
