"""The reference's workspace schemas plugins import (CommLogEntry)."""
from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel

__all__ = ["CommLogEntry"]


class CommLogEntry(BaseModel):
    id: int = 0
    workspace_id: int = 0
    direction: str = ""
    source_chat_key: str = ""
    content: str = ""
    is_streaming: bool = False
    task_id: Optional[str] = None
    extra_data: Optional[Any] = None
    create_time: str = ""

    @classmethod
    def from_orm(cls, obj: Any) -> "CommLogEntry":  # type: ignore[override]
        fields = {k: getattr(obj, k) for k in cls.__fields__ if hasattr(obj, k)} if hasattr(cls, "__fields__") else {}
        return cls(**{k: (str(v) if k == "create_time" else v) for k, v in fields.items()})
