"""Message segments plugins push (the reference's
nekro_agent.schemas.agent_message)."""
from __future__ import annotations

from enum import Enum
from typing import Any, List, Union

__all__ = ["AgentMessageSegment", "AgentMessageSegmentType", "convert_agent_message_to_prompt"]


class AgentMessageSegmentType(str, Enum):
    TEXT = "text"
    FILE = "file"
    AT = "at"


class AgentMessageSegment:
    def __init__(self, type: Any = AgentMessageSegmentType.TEXT, content: str = "", **_: Any):
        self.type = AgentMessageSegmentType(type)
        self.content = content


def convert_agent_message_to_prompt(messages: Union[str, List[AgentMessageSegment]]) -> str:
    if isinstance(messages, str):
        return messages
    return "".join(m.content if m.type == AgentMessageSegmentType.TEXT else "<%s:%s>" % (m.type.value, m.content)
                   for m in messages)
