"""The reference's envelope of a prompt sent to the Claude Code sandbox:
plain data, importable; nekro runs no such sandbox to send it to."""
from __future__ import annotations

from typing import Any, Dict, Optional

__all__ = ["CcPromptEnvelope", "CcPromptMeta"]


class CcPromptMeta:
    def __init__(self, **fields: Any):
        self.__dict__.update(fields)


class CcPromptEnvelope:
    def __init__(self, prompt: str = "", meta: Optional[CcPromptMeta] = None, **fields: Any):
        self.prompt, self.meta = prompt, meta or CcPromptMeta(**fields)

    @classmethod
    def for_na_path(cls, *args: Any, **kwargs: Any) -> "CcPromptEnvelope":
        prompt = kwargs.pop("prompt", args[0] if args else "")
        return cls(prompt=str(prompt), **kwargs)

    def render(self) -> str:
        return self.prompt

    def to_dict(self) -> Dict[str, Any]:
        return {"prompt": self.prompt, **vars(self.meta)}
