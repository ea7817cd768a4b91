"""dynamic_import_pkg at the reference's services path."""
from nekro_agent.api.plugin import dynamic_import_pkg

__all__ = ["dynamic_import_pkg"]
