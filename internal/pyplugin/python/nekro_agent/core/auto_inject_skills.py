"""The reference's skills injected into new Claude Code workspaces: nekro
runs no such workspaces, so there are none."""
from __future__ import annotations

from typing import Any, Dict, List

__all__ = ["get_auto_inject_skills"]


def get_auto_inject_skills() -> List[Dict[str, Any]]:
    return []
