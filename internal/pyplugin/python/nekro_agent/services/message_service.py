"""The reference's message_service, as plugins use it."""
from __future__ import annotations

from typing import Any, List, Optional, Union

from nekro_agent import _unavailable

__all__ = ["message_service"]


class MessageService(_unavailable.Service):
    def __init__(self):
        super().__init__("message_service", "nekro stores a chat's messages itself; plugins push system messages "
                                            "(push_system_message) and send through nekro_agent.api.message")

    async def push_system_message(self, chat_key: str, agent_messages: Union[str, List[Any]],
                                  trigger_agent: bool = False, db_chat_channel: Optional[Any] = None) -> None:
        from nekro_agent.api import message
        from nekro_agent.schemas.agent_message import convert_agent_message_to_prompt

        await message.push_system(chat_key, convert_agent_message_to_prompt(agent_messages),
                                  trigger_agent=trigger_agent)


message_service = MessageService()
