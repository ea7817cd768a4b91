"""The reference's ConfigService (its settings pages): nekro's settings
are nekro's."""
from nekro_agent import _unavailable


class ConfigService:
    pass


for _name in ("get_config_list", "get_config_value", "set_config_value", "save_config", "reload_config",
              "get_config_info", "batch_update_config"):
    setattr(ConfigService, _name, staticmethod(_unavailable.function(
        "ConfigService.%s()" % _name, "nekro's settings are set by its operator (nekro's flags and nekro plugins config)")))

__all__ = ["ConfigService"]
