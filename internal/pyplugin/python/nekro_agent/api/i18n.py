"""The i18n API: i18n_text and the types that go with it."""
from nekro_agent.schemas.i18n import I18nDict, SupportedLang, get_text, i18n_text

__all__ = ["I18nDict", "SupportedLang", "get_text", "i18n_text"]
