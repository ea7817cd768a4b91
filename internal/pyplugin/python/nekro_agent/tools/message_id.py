"""Message ids (the reference's nekro_agent.tools.message_id)."""
import re
from typing import Optional

__all__ = ["normalize_ref_msg_id"]

_ID = re.compile(r"(?:msg_?id|id)\s*[:=]\s*['\"]?([^'\"\s,\]]+)", re.IGNORECASE)


def normalize_ref_msg_id(ref_msg_id: object) -> Optional[str]:
    """The message id in what the model wrote ("123", "id: 123",
    "[msg_id:123]"), or None."""
    if ref_msg_id is None:
        return None
    text = str(ref_msg_id).strip()
    if not text:
        return None
    m = _ID.search(text)
    if m:
        return m.group(1) or None
    return text.strip("[]") or None
