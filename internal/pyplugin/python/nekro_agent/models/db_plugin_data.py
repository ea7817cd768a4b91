"""DBPluginData, the reference's model: importable; queries fail (NotAvailableError)
because a plugin keeps its data in plugin.store (nekro's KV) or its data directory."""
from nekro_agent.models._base import Model

__all__ = ["DBPluginData"]


class DBPluginData(Model):
    _why = "a plugin keeps its data in plugin.store (nekro's KV) or its data directory"
