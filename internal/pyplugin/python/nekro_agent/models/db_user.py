"""DBUser: the run's user, as the reference's row (read-only); other
users are not available."""
from __future__ import annotations

from typing import Any

from nekro_agent.models._base import EPOCH, Model

__all__ = ["DBUser"]


class DBUser(Model):
    _why = "a plugin sees only its run's user (_ctx.db_user)"

    @classmethod
    def _row(cls, user_id: str, adapter_key: str = "") -> "DBUser":
        return cls(id=0, username=user_id, platform_userid=user_id, adapter_key=adapter_key,
                   unique_id="%s:%s" % (adapter_key, user_id) if adapter_key else user_id, perm_level=0,
                   perm_role="user", is_active=True, is_prevent_trigger=False, ban_until=None,
                   prevent_trigger_until=None, ext_data={}, create_time=EPOCH, update_time=EPOCH)

    @property
    def is_super_admin(self) -> bool:
        return False

    @property
    def is_admin(self) -> bool:
        return False

    @property
    def is_prevent_trigger_until(self) -> Any:
        return None
