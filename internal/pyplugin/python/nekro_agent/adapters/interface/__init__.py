"""The reference's adapter interface types."""
from nekro_agent.adapters.utils import Adapter as BaseAdapter

__all__ = ["BaseAdapter"]
