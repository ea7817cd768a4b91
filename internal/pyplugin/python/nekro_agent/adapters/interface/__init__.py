"""The reference's adapter interface types."""
from nekro_agent.adapters.interface.schemas.platform import PlatformChannel, PlatformUser
from nekro_agent.adapters.utils import Adapter as BaseAdapter

__all__ = ["BaseAdapter", "PlatformChannel", "PlatformUser"]
