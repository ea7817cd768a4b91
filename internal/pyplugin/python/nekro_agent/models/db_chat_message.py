"""DBChatMessage, the reference's model: importable; queries fail (NotAvailableError)
because nekro does not give plugins a chat's stored messages yet."""
from nekro_agent.models._base import Model

__all__ = ["DBChatMessage"]


class DBChatMessage(Model):
    _why = "nekro does not give plugins a chat's stored messages yet"
