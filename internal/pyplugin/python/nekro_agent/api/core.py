"""core: the logger, the core settings and the vector database helpers,
as the reference's api.core offers them."""
from __future__ import annotations

import logging

from nekro_agent.core.config import CoreConfig, ModelConfigGroup, config
from nekro_agent.core.logger import Logger, get_sub_logger, logger
from nekro_agent.core.vector_db import get_qdrant_client, get_qdrant_config

__all__ = ["CoreConfig", "ModelConfigGroup", "config", "get_qdrant_client", "get_qdrant_config", "logger",
           "get_sub_logger", "Logger"]

# SUCCESS for the standard logging module too (plugin.logger is one).
SUCCESS = 25
logging.addLevelName(SUCCESS, "SUCCESS")
