"""WorkspaceService, the reference's: the paths of a workspace's knowledge
files and what its Claude Code sandbox holds. nekro keeps a knowledge
document's text (not its file) and runs no sandbox: the paths are logical
names, and reading or writing the sandbox's files raises NotAvailableError."""
from __future__ import annotations

from pathlib import Path

from nekro_agent import _unavailable

__all__ = ["WorkspaceService"]

_NO_SANDBOX = "nekro runs no Claude Code sandbox (a chat's workspace is its knowledge base and memories)"


class WorkspaceService(metaclass=_unavailable.ServiceClass):
    _what = "WorkspaceService"
    _why = _NO_SANDBOX

    @staticmethod
    def get_kb_source_workspace_path(rel_path: str) -> str:
        return "kb/files/%s" % rel_path.lstrip("/")

    @staticmethod
    def get_kb_normalized_workspace_path(rel_path: str) -> str:
        return "kb/normalized/%s" % rel_path.lstrip("/")

    @staticmethod
    def resolve_kb_source_path(workspace_id: int, rel_path: str) -> Path:
        _unavailable.fail("the source file of knowledge document %s" % rel_path,
                          "nekro keeps a knowledge document's text, not the file it was read from")

    @staticmethod
    def resolve_kb_normalized_path(workspace_id: int, rel_path: str) -> Path:
        _unavailable.fail("the normalized file of knowledge document %s" % rel_path,
                          "nekro keeps a knowledge document's text in its database (read it with "
                          "read_normalized_content_async)")

    @staticmethod
    def get_workspace_dir(workspace_id: int) -> Path:
        _unavailable.fail("WorkspaceService.get_workspace_dir()", _NO_SANDBOX)
