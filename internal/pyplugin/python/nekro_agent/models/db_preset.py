"""DBPreset, the reference's model: importable; queries fail (NotAvailableError)
because nekro has no presets (the persona is the operator's system prompt)."""
from nekro_agent.models._base import Model

__all__ = ["DBPreset"]


class DBPreset(Model):
    _why = "nekro has no presets (the persona is the operator's system prompt)"
