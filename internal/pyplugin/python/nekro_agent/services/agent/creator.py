"""Chat messages for the model helpers (the reference's
nekro_agent.services.agent.creator)."""
from __future__ import annotations

import base64
import mimetypes
import os
from typing import Any, Dict, List, Optional, Union

__all__ = ["ContentSegment", "OpenAIChatMessage"]


class ContentSegment:
    """Content parts: text, and images as data: URLs or http(s) URLs."""

    @staticmethod
    def text_content(text: str) -> Dict[str, Any]:
        return {"type": "text", "text": text}

    @staticmethod
    def image_content(src: str) -> Dict[str, Any]:
        return {"type": "image_url", "image_url": {"url": src}}

    @staticmethod
    def image_content_from_path(path: Union[str, os.PathLike]) -> Dict[str, Any]:
        path = os.fspath(path)
        mime = mimetypes.guess_type(path)[0] or "image/png"
        with open(path, "rb") as f:
            data = base64.b64encode(f.read()).decode("ascii")
        return ContentSegment.image_content("data:%s;base64,%s" % (mime, data))


class OpenAIChatMessage:
    def __init__(self, role: str, content: Union[str, List[Dict[str, Any]]]):
        self.role, self.content = role, content

    @classmethod
    def from_text(cls, role: str, text: str) -> "OpenAIChatMessage":
        return cls(role, [ContentSegment.text_content(text)])

    @classmethod
    def create_empty(cls, role: str) -> "OpenAIChatMessage":
        return cls(role, [])

    def add(self, segment: Dict[str, Any]) -> "OpenAIChatMessage":
        if isinstance(self.content, str):
            self.content = [ContentSegment.text_content(self.content)]
        self.content.append(segment)
        return self

    def batch_add(self, segments: List[Dict[str, Any]]) -> "OpenAIChatMessage":
        for seg in segments:
            self.add(seg)
        return self

    def to_dict(self) -> Dict[str, Any]:
        return {"role": self.role, "content": self.content}

    model_dump = to_dict

    def tidy(self) -> "OpenAIChatMessage":
        return self

    def is_empty(self) -> bool:
        return not self.content


_: Optional[Any] = None
