"""The reference's memory switches: the memory is on when nekro runs with
--memory (the core config's MEMORY_ENABLE_SYSTEM, set when the plugin's
process starts)."""
from __future__ import annotations

from enum import Enum

from nekro_agent.core.config import config

__all__ = ["MemoryOperation", "ensure_memory_system_enabled", "is_memory_system_enabled"]


class MemoryOperation(str, Enum):
    CONTEXT_INJECTION = "context_injection"
    RETRIEVAL = "retrieval"
    CONSOLIDATION = "consolidation"
    CC_HANDSHAKE = "cc_handshake"
    CC_SEMANTIC_PERSIST = "cc_semantic_persist"
    REBUILD = "rebuild"
    PRUNE = "prune"
    EPISODE_AGGREGATION = "episode_aggregation"
    SCHEDULER = "scheduler"


def is_memory_system_enabled() -> bool:
    return bool(config.MEMORY_ENABLE_SYSTEM)


def ensure_memory_system_enabled(operation: "MemoryOperation | str" = MemoryOperation.RETRIEVAL) -> None:
    if not is_memory_system_enabled():
        raise ValueError("记忆系统已关闭 (nekro's long-term memory is off: nekro serve --memory turns it on), "
                         "cannot run %s" % getattr(operation, "value", operation))
