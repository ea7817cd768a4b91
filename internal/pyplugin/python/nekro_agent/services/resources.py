"""The reference's workspace resources (credentials and settings a
workspace's Claude Code sandbox gets as environment variables): nekro has
no such sandbox, and gives plugins no credentials."""
from __future__ import annotations

from nekro_agent import _unavailable

__all__ = ["workspace_resource_service"]

workspace_resource_service = _unavailable.Service(
    "workspace_resource_service", "nekro runs no Claude Code sandbox and gives plugins no credentials")
