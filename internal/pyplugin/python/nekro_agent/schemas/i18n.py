"""Texts in several languages, as the reference's plugins write them:
i18n_text(zh_CN=..., en_US=...) is a dict keyed by language code."""
from __future__ import annotations

from enum import Enum
from typing import Dict, Optional, Union

__all__ = ["I18nDict", "SupportedLang", "get_text", "i18n_text", "t", "resolve_i18n", "get_system_lang",
           "set_system_lang"]


class SupportedLang(str, Enum):
    ZH_CN = "zh-CN"
    EN_US = "en-US"

    @classmethod
    def from_accept_language(cls, accept_lang: str) -> "SupportedLang":
        if accept_lang and accept_lang.split(",")[0].strip().lower().startswith("en"):
            return cls.EN_US
        return cls.ZH_CN


I18nDict = Dict[str, str]

# The reference's system language is its setting; nekro's plugins speak
# the reference's default.
_system_lang = SupportedLang.ZH_CN


def get_system_lang() -> SupportedLang:
    return _system_lang


def set_system_lang(lang: SupportedLang) -> None:
    global _system_lang
    _system_lang = SupportedLang(lang)


def get_text(i18n_dict: Optional[I18nDict], default: str, lang: SupportedLang = SupportedLang.ZH_CN) -> str:
    """The text in lang, else default."""
    if not i18n_dict:
        return default
    return i18n_dict.get(SupportedLang(lang).value, default)


def t(*, zh_CN: str, en_US: str) -> str:
    """The text in the system language."""
    return {SupportedLang.ZH_CN.value: zh_CN, SupportedLang.EN_US.value: en_US}.get(_system_lang.value, zh_CN)


def resolve_i18n(text: Union[str, I18nDict]) -> str:
    if isinstance(text, str):
        return text
    return text.get(_system_lang.value, next(iter(text.values()), ""))


def i18n_text(*, zh_CN: str, en_US: str) -> I18nDict:
    """{"zh-CN": zh_CN, "en-US": en_US}."""
    return {SupportedLang.ZH_CN.value: zh_CN, SupportedLang.EN_US.value: en_US}
