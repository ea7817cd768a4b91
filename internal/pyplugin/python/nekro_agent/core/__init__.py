"""The reference's core: its logger and its settings object."""
from .config import config  # noqa: F401
from .logger import logger  # noqa: F401
