"""_ctx.fs: files between the plugin and the sandbox (seed 003)."""
from __future__ import annotations

from pathlib import Path


class FileSystem:
    def __init__(self, chat_key: str, container_key: str, call: str = ""):
        self.chat_key = chat_key
        self.container_key = container_key
        self._call = call

    def __repr__(self) -> str:
        return "FileSystem(chat_key=%r, container_key=%r)" % (self.chat_key, self.container_key)
