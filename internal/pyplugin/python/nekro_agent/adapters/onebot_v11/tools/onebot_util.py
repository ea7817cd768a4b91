"""OneBot v11 helpers of the reference (nonebot's): importable, each call
raises NotAvailableError."""
from nekro_agent import _unavailable

__getattr__ = _unavailable.module_getattr("nekro_agent.adapters.onebot_v11.tools.onebot_util", "nekro's OneBot adapter does not give plugins the OneBot bot API (calls such as get_group_info, set_group_card) yet")
