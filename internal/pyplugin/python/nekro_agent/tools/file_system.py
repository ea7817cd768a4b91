"""_ctx.fs: files between the plugin and the sandbox, as seed 003 shows.

Sandbox paths are /app/shared/... (the sandbox's own files) and
/app/uploads/... (the chat's uploads, read-only to the code); "shared/x"
and "uploads/x" (relative to /app) mean the same. Anything else, and any
"..", is a ValueError; so is a path whose symlinks lead out of its
directory (the sandbox can plant symlinks).
"""
from __future__ import annotations

import base64
import os
import posixpath
from pathlib import Path
from typing import Union

_AREAS = (("/app/shared", "shared"), ("/app/uploads", "uploads"))


class FileSystem:
    def __init__(self, chat_key: str, container_key: str, call: str = "", shared_path: str = "", upload_path: str = ""):
        self.chat_key = chat_key
        self.container_key = container_key
        self._call = call
        self._shared = shared_path
        self._upload = upload_path

    @property
    def shared_path(self) -> Path:
        """The host directory the sandbox sees as /app/shared."""
        return Path(self._shared)

    @property
    def upload_path(self) -> Path:
        """The host directory the sandbox sees as /app/uploads."""
        return Path(self._upload)

    def _base(self, area: str) -> str:
        return self._shared if area == "shared" else self._upload

    def get_file(self, sandbox_path: Union[str, Path]) -> Path:
        """The host path of a sandbox path (AI -> plugin)."""
        p = str(sandbox_path)
        if "\x00" in p:
            raise ValueError("文件路径含有 NUL")
        if not p.startswith("/"):  # relative to /app
            p = "/app/" + (p[2:] if p.startswith("./") else p)
        if ".." in p.split("/"):
            raise ValueError('文件 "%s" 含有 "..":不在合法的沙盒内容共享目录或上传目录下' % sandbox_path)
        for prefix, area in _AREAS:
            if p == prefix or p.startswith(prefix + "/"):
                rel = p[len(prefix):].lstrip("/")
                base = self._base(area)
                host = os.path.join(base, rel) if rel else base
                _check_beneath(host, base, sandbox_path)
                return Path(host)
        raise ValueError('文件 "%s" 不在合法的沙盒内容共享目录或上传目录下 (/app/shared/ 或 /app/uploads/)' % sandbox_path)

    def forward_file(self, host_path: Union[str, Path]) -> str:
        """The sandbox path of a host file already in this chat's shared or
        uploads directory (plugin -> AI), without a copy."""
        p = posixpath.normpath(os.path.abspath(str(host_path)))
        for prefix, area in _AREAS:
            base = self._base(area)
            if base and (p == base or p.startswith(base.rstrip("/") + "/")):
                _check_beneath(p, base, host_path)
                rel = p[len(base):].lstrip("/")
                return prefix + ("/" + rel if rel else "")
        raise ValueError('文件 "%s" 不在合法的应用共享目录或上传目录下' % host_path)

    async def mixed_forward_file(self, file: Union[str, bytes, Path], file_name: str = "") -> str:
        """Put a file into /app/shared and return its sandbox path: an http(s)
        URL (downloaded by nekro, private addresses refused), a data: URI,
        bytes, or a host path in this chat's directories or the plugin's own
        data directory."""
        from nekro_agent import _link

        args = {"file_name": file_name or ""}
        if isinstance(file, (bytes, bytearray)):
            args["bytes"] = base64.b64encode(bytes(file)).decode("ascii")
        elif isinstance(file, str) and (file.startswith(("http://", "https://", "data:"))):
            args["url"] = file
        else:
            args["path"] = os.path.abspath(str(file))
        prev = _link.current_call.set(self._call or _link.current_call.get())
        try:
            return await _link.get().request("fs.mixed_forward_file", **args)
        finally:
            _link.current_call.reset(prev)

    def __repr__(self) -> str:
        return "FileSystem(chat_key=%r, container_key=%r)" % (self.chat_key, self.container_key)


def _check_beneath(host: str, base: str, shown) -> None:
    """Refuse a path whose resolved target leaves base."""
    real_base = os.path.realpath(base)
    real = os.path.realpath(host)
    if real != real_base and not real.startswith(real_base.rstrip("/") + "/"):
        raise ValueError('文件 "%s" 经符号链接指向目录之外' % shown)
