"""ConfigBase and ExtraField, at the reference's core path."""
from nekro_agent._config import ConfigBase, ExtraField

__all__ = ["ConfigBase", "ExtraField"]
