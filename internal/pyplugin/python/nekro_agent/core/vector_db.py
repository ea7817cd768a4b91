"""The reference's Qdrant helpers: importable, unavailable (nekro has no
vector database)."""
from nekro_agent import _unavailable

_WHY = "nekro has no vector database (Qdrant); plugins that need one do not work yet"

get_qdrant_client = _unavailable.function("get_qdrant_client", _WHY)
get_qdrant_config = _unavailable.function("get_qdrant_config", _WHY, is_async=False)

__all__ = ["get_qdrant_client", "get_qdrant_config"]
