"""MsgSignal: what a mount_on_user_message hook says about a message."""
from enum import Enum

__all__ = ["MsgSignal"]


class MsgSignal(Enum):
    """A message hook's verdict. Across plugins any BLOCK_ALL wins, then
    any FORCE_TRIGGER, then the largest (None counts as CONTINUE)."""

    FORCE_TRIGGER = -1  # answer it even where the bot would stay quiet
    CONTINUE = 0  # store it and answer as usual
    BLOCK_TRIGGER = 1  # store it in the history, start no turn
    BLOCK_ALL = 2  # drop it: not stored, not answered
