"""MsgSignal, at the reference's schemas path."""
from nekro_agent.api.signal import MsgSignal

__all__ = ["MsgSignal"]
