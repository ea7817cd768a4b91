"""Command permissions and metadata (the reference's
nekro_agent.services.command.base)."""
from __future__ import annotations

from enum import Enum
from typing import Any, List, Optional

from nekro_agent.schemas.i18n import SupportedLang, get_text
from nekro_agent.services.command.schemas import CommandExecutionContext, CommandResponse, _Record

__all__ = ["BUILT_IN_SOURCE", "BaseCommand", "CommandMetadata", "CommandPermission"]

BUILT_IN_SOURCE = "built_in"


class CommandPermission(str, Enum):
    PUBLIC = "public"
    USER = "user"
    ADVANCED = "advanced"
    SUPER_USER = "super_user"


class CommandMetadata(_Record):
    _fields = {"name": "", "namespace": BUILT_IN_SOURCE, "aliases": [], "description": "", "i18n_description": None,
               "usage": "", "i18n_usage": None, "permission": CommandPermission.PUBLIC, "category": "general",
               "i18n_category": None, "source": BUILT_IN_SOURCE, "tags": [], "params_schema": None,
               "internal": False}

    def get_description(self, lang: SupportedLang = SupportedLang.ZH_CN) -> str:
        return get_text(self.i18n_description, self.description, lang)

    def get_usage(self, lang: SupportedLang = SupportedLang.ZH_CN) -> str:
        return get_text(self.i18n_usage, self.usage, lang)

    def get_category(self, lang: SupportedLang = SupportedLang.ZH_CN) -> str:
        return get_text(self.i18n_category, self.category, lang)


class BaseCommand:
    """A command: metadata and execute(context, **kwargs)."""

    @property
    def metadata(self) -> CommandMetadata:
        raise NotImplementedError

    async def execute(self, context: CommandExecutionContext, **kwargs: Any) -> CommandResponse:
        raise NotImplementedError


_: List[Optional[Any]] = []
