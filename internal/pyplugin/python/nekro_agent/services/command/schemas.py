"""Command data: the execution context, responses, argument descriptors
(the reference's nekro_agent.services.command.schemas)."""
from __future__ import annotations

import mimetypes
from enum import Enum
from pathlib import Path
from typing import Any, Dict, List, Optional

from nekro_agent.schemas.i18n import SupportedLang

__all__ = ["Arg", "CommandExecutionContext", "CommandOutputSegment", "CommandOutputSegmentType", "CommandRequest",
           "CommandResponse", "CommandResponseStatus"]

_UNSET = object()


class _Record:
    """Keyword fields with defaults, model_dump() like the reference's models."""

    _fields: Dict[str, Any] = {}

    def __init__(self, **values: Any):
        for k, default in self._fields.items():
            if k not in values and default is _UNSET:
                raise TypeError("%s: missing field %r" % (type(self).__name__, k))
            setattr(self, k, values.pop(k, default) if default is not _UNSET else values.pop(k))
        for k, v in values.items():
            setattr(self, k, v)

    def model_dump(self, **_: Any) -> Dict[str, Any]:
        return {k: getattr(self, k) for k in self._fields}

    def __repr__(self) -> str:
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % (k, getattr(self, k)) for k in self._fields))


class CommandExecutionContext(_Record):
    """Who runs a command, in which chat."""

    _fields = {"user_id": _UNSET, "chat_key": _UNSET, "username": _UNSET, "adapter_key": _UNSET,
               "is_super_user": False, "is_advanced_user": False, "lang": SupportedLang.ZH_CN}


class CommandRequest(_Record):
    _fields = {"context": _UNSET, "command_name": _UNSET, "raw_args": ""}


class CommandResponseStatus(str, Enum):
    SUCCESS = "success"
    ERROR = "error"
    UNAUTHORIZED = "unauthorized"
    NOT_FOUND = "not_found"
    INVALID_ARGS = "invalid_args"
    DISABLED = "disabled"
    PROCESSING = "processing"
    WAITING = "waiting"


class CommandOutputSegmentType(str, Enum):
    TEXT = "text"
    IMAGE = "image"
    FILE = "file"


class CommandOutputSegment(_Record):
    _fields = {"type": _UNSET, "text": "", "file_path": None, "file_name": None, "mime_type": None, "web_url": None}

    def __init__(self, **values: Any):
        super().__init__(**values)
        self.type = CommandOutputSegmentType(self.type)
        if self.type != CommandOutputSegmentType.TEXT and self.file_path:
            self.file_name = self.file_name or Path(self.file_path).name
            self.mime_type = self.mime_type or mimetypes.guess_type(self.file_name)[0] or "application/octet-stream"


class CommandResponse(_Record):
    _fields = {"status": _UNSET, "message": _UNSET, "data": None, "output_segments": None, "callback_cmd": None,
               "wait_options": None, "wait_timeout": None, "on_timeout_message": None, "context_data": None}


class Arg:
    """A command parameter's description, as a default value
    (`city: str = Arg("city", default="Beijing", positional=True)`)."""

    def __init__(self, description: str = "", *, default: Any = _UNSET, positional: bool = False,
                 greedy: bool = False, choices: Optional[List[str]] = None, range: Optional[tuple] = None,
                 prompt_hint: Optional[str] = None):
        self.description = description
        self.default = default
        self.positional = positional
        self.greedy = greedy
        self.choices = choices
        self.range = range
        self.prompt_hint = prompt_hint

    @property
    def has_default(self) -> bool:
        return self.default is not _UNSET

    def __repr__(self) -> str:
        return "Arg(%r)" % self.description
