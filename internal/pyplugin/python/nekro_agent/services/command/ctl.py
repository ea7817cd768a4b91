"""CmdCtl: what a command yields or returns (the reference's
nekro_agent.services.command.ctl)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union

from nekro_agent.schemas.i18n import I18nDict, resolve_i18n
from nekro_agent.services.command.schemas import (
    CommandOutputSegment,
    CommandOutputSegmentType,
    CommandResponse,
    CommandResponseStatus,
)

__all__ = ["CmdCtl"]

CommandContent = Union[str, I18nDict, List[CommandOutputSegment]]


def _content(content: CommandContent) -> Tuple[str, Optional[List[CommandOutputSegment]]]:
    if not isinstance(content, list):
        return resolve_i18n(content), None
    if not content:
        return "", None
    segs = list(content)
    message = ""
    if segs[0].type == CommandOutputSegmentType.TEXT and segs[0].text.strip():
        message = segs[0].text
        segs = segs[1:]
    return message, segs or None


class CmdCtl:
    """message (progress), wait (ask the user), success and failed (the
    end)."""

    @staticmethod
    def message(content: CommandContent, data: Optional[Dict[str, Any]] = None) -> CommandResponse:
        message, segs = _content(content)
        return CommandResponse(status=CommandResponseStatus.PROCESSING, message=message, data=data, output_segments=segs)

    @staticmethod
    def wait(message: CommandContent, callback_cmd: str, options: Optional[List[str]] = None, timeout: float = 60,
             on_timeout_message: Optional[str] = None, context_data: Optional[Dict[str, Any]] = None) -> CommandResponse:
        return CommandResponse(status=CommandResponseStatus.WAITING, message=resolve_i18n(message) if not isinstance(message, list) else _content(message)[0],
                               callback_cmd=callback_cmd, wait_options=options, wait_timeout=timeout,
                               on_timeout_message=on_timeout_message, context_data=context_data)

    @staticmethod
    def success(content: CommandContent = "", data: Optional[Dict[str, Any]] = None) -> CommandResponse:
        message, segs = _content(content)
        return CommandResponse(status=CommandResponseStatus.SUCCESS, message=message, data=data, output_segments=segs)

    @staticmethod
    def failed(content: CommandContent = "", data: Optional[Dict[str, Any]] = None) -> CommandResponse:
        message, segs = _content(content)
        return CommandResponse(status=CommandResponseStatus.ERROR, message=message, data=data, output_segments=segs)
