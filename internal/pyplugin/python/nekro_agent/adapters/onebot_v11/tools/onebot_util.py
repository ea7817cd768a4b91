"""OneBot v11 helpers of the reference (nonebot's): importable, each call
raises NotAvailableError."""
from nekro_agent import _unavailable

__getattr__ = _unavailable.module_getattr("nekro_agent.adapters.onebot_v11.tools.onebot_util", "nekro gives plugins the OneBot bot API through get_bot() (read-only actions of the call's chat), not nonebot's helpers")
