"""DBWorkspace, the reference's model: importable; queries fail (NotAvailableError)
because nekro has no CC workspaces."""
from nekro_agent.models._base import Model

__all__ = ["DBWorkspace"]


class DBWorkspace(Model):
    _why = "nekro has no CC workspaces"
