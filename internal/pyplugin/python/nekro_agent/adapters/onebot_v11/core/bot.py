"""get_bot: nonebot's OneBot v11 Bot in the reference. nekro's OneBot
adapter is its own (no nonebot): the bot importable, each call of it
raises NotAvailableError."""
from nekro_agent import _unavailable

__all__ = ["get_bot"]

_WHY = "nekro's OneBot adapter does not give plugins the OneBot bot API (calls such as get_group_info, set_group_card) yet"


class Bot(_unavailable.Service):
    def __init__(self):
        super().__init__("the OneBot v11 bot", _WHY)


def get_bot() -> Bot:
    return Bot()
