"""@ markup helpers (the reference's nekro_agent.tools.at_markup)."""
import re

__all__ = ["neutralize_at_all_markup"]

_AT_ALL = re.compile(r"\[@(?:id:)?all(?:;nickname:[^@\]\n]+)?@\]", re.IGNORECASE)


def neutralize_at_all_markup(text: str) -> str:
    """An @all mention made plain text, so it notifies no one."""
    return _AT_ALL.sub("@全体成员", text)
