"""DBExecCode, the reference's model: importable; queries fail (NotAvailableError)
because a plugin does not reach nekro's database."""
from nekro_agent.models._base import Model

__all__ = ["DBExecCode"]


class DBExecCode(Model):
    _why = "a plugin does not reach nekro's database"
