"""The reference's live feed of a workspace's communication log (for its
web UI). nekro has no such log or page: publishing is a no-op, as in the
reference when nobody listens."""
from __future__ import annotations

from typing import Any

__all__ = ["publish"]


async def publish(workspace_id: int, entry: Any) -> None:
    return None
