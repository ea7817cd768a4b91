"""core.config: the reference's core settings object, with the keys
plugins read.

nekro's own settings (model groups, API keys, the sandbox) stay in nekro:
a plugin process never holds the operator's credentials. The keys below
answer with the reference's defaults or what nekro does in their place
(MODEL_GROUPS names a "default" group without credentials: plugins reach
models through nekro_agent.services.agent.openai, which asks nekro). A
key nekro has no counterpart for raises AttributeError naming it.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from nekro_agent._config import ConfigBase

__all__ = ["CoreConfig", "ModelConfigGroup", "config", "core_config"]


class ModelConfigGroup:
    """A model group's settings, as the reference names them."""

    def __init__(self, GROUP_NAME: str = "", CHAT_MODEL: str = "", CHAT_PROXY: str = "", BASE_URL: str = "",
                 API_KEY: str = "", MODEL_TYPE: str = "chat", ENABLE_VISION: bool = False, ENABLE_COT: bool = False,
                 TEMPERATURE: Optional[float] = None, TOP_P: Optional[float] = None, TOP_K: Optional[int] = None,
                 PRESENCE_PENALTY: Optional[float] = None, FREQUENCY_PENALTY: Optional[float] = None,
                 EXTRA_BODY: Optional[str] = None, **_: Any):
        self.GROUP_NAME = GROUP_NAME
        self.CHAT_MODEL = CHAT_MODEL
        self.CHAT_PROXY = CHAT_PROXY
        self.BASE_URL = BASE_URL
        self.API_KEY = API_KEY
        self.MODEL_TYPE = MODEL_TYPE
        self.ENABLE_VISION = ENABLE_VISION
        self.ENABLE_COT = ENABLE_COT
        self.TOKEN_INPUT_RATE = 1.0
        self.TOKEN_COMPLETION_RATE = 1.0
        self.MODEL_PRICE_RATE = 1.0
        self.TEMPERATURE = TEMPERATURE
        self.TOP_P = TOP_P
        self.TOP_K = TOP_K
        self.PRESENCE_PENALTY = PRESENCE_PENALTY
        self.FREQUENCY_PENALTY = FREQUENCY_PENALTY
        self.EXTRA_BODY = EXTRA_BODY

    def model_dump(self, **_: Any) -> Dict[str, Any]:
        return dict(vars(self))

    def __repr__(self) -> str:
        return "ModelConfigGroup(GROUP_NAME=%r, CHAT_MODEL=%r)" % (self.GROUP_NAME, self.CHAT_MODEL)


def _defaults() -> Dict[str, Any]:
    return {
        "APP_HOST": "127.0.0.1",
        "APP_PORT": 8021,
        "APP_LOG_LEVEL": "INFO",
        "SUPER_USERS": [],
        "ADMIN_EMAIL": "",
        "DEBUG_IN_CHAT": False,
        "DEFAULT_PROXY": "",
        "DEFAULT_PROXY_USERNAME": "",
        "DEFAULT_PROXY_PASSWORD": "",
        # nekro's model groups by name: "chat" answers turns, "vision"
        # sees images (as the operator configures them); "default" is the
        # reference's name for the first.
        "MODEL_GROUPS": {"default": ModelConfigGroup(GROUP_NAME="default", CHAT_MODEL="chat"),
                         "chat": ModelConfigGroup(GROUP_NAME="chat", CHAT_MODEL="chat"),
                         "vision": ModelConfigGroup(GROUP_NAME="vision", CHAT_MODEL="vision", ENABLE_VISION=True)},
        "USE_MODEL_GROUP": "default",
        "FALLBACK_MODEL_GROUP": "default",
        "DEBUG_MIGRATION_MODEL_GROUP": "",
        "PLUGIN_GENERATE_MODEL_GROUP": "default",
        "PLUGIN_APPLY_MODEL_GROUP": "default",
        "AI_CHAT_PRESET_NAME": "可洛喵",
        "AI_CHAT_PRESET_SETTING": "",
        "AI_CHAT_DEFAULT_PRESET_ID": None,
        "AI_CHAT_CONTEXT_EXPIRE_SECONDS": 60 * 30,
        "AI_CHAT_CONTEXT_MAX_LENGTH": 24,
        "AI_CONTEXT_LENGTH_PER_MESSAGE": 512,
        "AI_CONTEXT_LENGTH_PER_SESSION": 5120,
        "AI_SCRIPT_MAX_RETRY_TIMES": 3,
        "AI_CHAT_LLM_API_MAX_RETRIES": 3,
        "AI_GENERATE_TIMEOUT": 180,
        "AI_REQUEST_STREAM_MODE": False,
        "AI_VISION_IMAGE_LIMIT": 5,
        "AI_VISION_IMAGE_SIZE_LIMIT_KB": 1024,
        "AI_ALWAYS_INCLUDE_MSG_ID": False,
        "AI_CHAT_RANDOM_REPLY_PROBABILITY": 0.0,
        "AI_CHAT_TRIGGER_REGEX": [],
        "AI_CHAT_IGNORE_REGEX": [],
        "AI_IGNORED_PREFIXES": [],
        "AI_COMMAND_OUTPUT_PREFIX": "",
        "SESSION_GROUP_ACTIVE_DEFAULT": True,
        "SESSION_PRIVATE_ACTIVE_DEFAULT": True,
        "SESSION_ENABLE_FAILED_LLM_FEEDBACK": True,
        "SANDBOX_RUNNING_TIMEOUT": 60,
        "SANDBOX_MAX_CONCURRENT": 4,
        "SANDBOX_IMAGE_NAME": "",
        "ENABLE_NEKRO_CLOUD": False,
        "NEKRO_CLOUD_API_KEY": "",
        "ENSURE_SFW_CONTENT": True,
        "ENABLE_COMMAND_UNAUTHORIZED_OUTPUT": False,
        "ENABLE_ADVANCED_COMMAND": False,
        "ENABLE_FESTIVAL_REMINDER": True,
        "MAX_UPLOAD_SIZE_MB": 10,
        "PLUGIN_ENABLED": [],
        "PLUGIN_UPDATE_USE_PROXY": False,
        "SYSTEM_LANG": "zh-CN",
        "OPENAI_CLIENT_USER_AGENT": "nekro",
        # The long-term memory: nekro serve --memory, set when the plugin's
        # process starts.
        "MEMORY_ENABLE_SYSTEM": False,
        # The reference's Claude Code sandbox (nekro runs none: its
        # workspace services say so when used).
        "CC_SANDBOX_IMAGE": "kromiose/nekro-cc-sandbox",
        "CC_SANDBOX_IMAGE_TAG": "latest",
        "CC_SANDBOX_INTERNAL_PORT": 7021,
        "CC_SANDBOX_STARTUP_TIMEOUT": 120,
    }


_UNAVAILABLE = {
    "QDRANT_URL": "nekro has no vector database",
    "QDRANT_API_KEY": "nekro has no vector database",
    "POSTGRES_HOST": "a plugin does not reach nekro's database",
    "POSTGRES_PORT": "a plugin does not reach nekro's database",
    "POSTGRES_USER": "a plugin does not reach nekro's database",
    "POSTGRES_PASSWORD": "a plugin does not reach nekro's database",
    "POSTGRES_DATABASE": "a plugin does not reach nekro's database",
}


class CoreConfig:
    """The reference's CoreConfig, read-only as plugins use it."""

    def __init__(self, **values: Any):
        object.__setattr__(self, "_values", {**_defaults(), **values})

    def __getattr__(self, name: str):
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        if name.startswith("__"):
            raise AttributeError(name)
        why = _UNAVAILABLE.get(name, "nekro has no counterpart of this Nekro Agent setting")
        raise AttributeError("core config %s is not available in nekro: %s" % (name, why))

    def __setattr__(self, name: str, value: Any) -> None:
        object.__getattribute__(self, "_values")[name] = value  # this process's copy only

    def get_model_group_info(self, model_name: str) -> ModelConfigGroup:
        groups = self.MODEL_GROUPS
        if model_name not in groups:
            raise KeyError("model group %r not found (nekro's model groups are used through "
                           "nekro_agent.services.agent.openai)" % model_name)
        return groups[model_name]

    def model_dump(self, **_: Any) -> Dict[str, Any]:
        return dict(object.__getattribute__(self, "_values"))

    def dump_config(self, *_a: Any, **_k: Any) -> None:
        """Settings are nekro's to keep: nothing is written."""

    def reload_config(self, *_a: Any, **_k: Any) -> None:
        pass

    @classmethod
    def load_config(cls, *_a: Any, **_k: Any) -> "CoreConfig":
        return config


config = CoreConfig()
core_config = config
_: List[Any] = [ConfigBase]  # the reference's CoreConfig is a ConfigBase; plugins import it from here
