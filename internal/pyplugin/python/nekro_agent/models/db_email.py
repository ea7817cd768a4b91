"""DBEmail, the reference's model: importable; queries fail (NotAvailableError)
because nekro has no email adapter."""
from nekro_agent.models._base import Model

__all__ = ["DBEmail"]


class DBEmail(Model):
    _why = "nekro has no email adapter"
