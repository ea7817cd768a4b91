"""The path helpers of the plugin documents (seed 002).

They work for the chat of the sandbox method that calls them: nekro
knows that chat's directories (each chat's are its own, and may be
volumes of their own). A chat key of another chat is a ValueError.
"""
from __future__ import annotations

import enum
from pathlib import Path, PurePosixPath
from typing import Optional, Union

from nekro_agent import _link


class PathLocation(enum.Enum):
    """The two areas a sandbox sees."""

    UPLOADS = "uploads"
    SHARED = "shared"


def _fs(chat_key: Optional[str]):
    ctx = _link.current_ctx.get()
    if ctx is None:
        raise ValueError("path helpers work inside a sandbox method, for its chat")
    if chat_key and chat_key != ctx.from_chat_key:
        raise ValueError("chat %r is not the chat of this call (%r): its files are out of reach" % (chat_key, ctx.from_chat_key))
    return ctx.fs


def is_url_path(path: str) -> bool:
    """Whether path is an http or https URL."""
    return isinstance(path, str) and path.startswith(("http://", "https://"))


def convert_to_host_path(sandbox_path: Union[str, Path], chat_key: str, container_key: Optional[str] = None) -> Path:
    """The host path of a sandbox path (/app/uploads/... or /app/shared/...,
    or relative to /app)."""
    return _fs(chat_key).get_file(str(sandbox_path))


def convert_filename_to_access_path(filename: Union[str, Path], chat_key: str) -> Path:
    """The host path a file named filename has in the chat's uploads."""
    name = PurePosixPath(str(filename)).name
    if not name or name in (".", ".."):
        raise ValueError("%r is not a file name" % (filename,))
    return _fs(chat_key).upload_path / name


def convert_filename_to_container_path(filename: Union[str, Path]) -> Path:
    """/app/uploads/<name>: how the sandbox sees an uploads file."""
    return Path("/app/uploads") / PurePosixPath(str(filename)).name


get_sandbox_path = convert_filename_to_container_path


def convert_to_container_path(path: Union[str, Path]) -> Path:
    """/app/uploads/<name of path>: a host file, as an uploads file."""
    return convert_filename_to_container_path(PurePosixPath(str(path)).name)


def sanitize_chat_key_for_path(chat_key: str) -> str:
    """A chat key usable as one path element."""
    import re

    return re.sub(r"[^A-Za-z0-9_.-]", "_", chat_key)


def convert_filename_to_sandbox_upload_path(filename: Union[str, Path]) -> Path:
    """The sandbox path of an uploaded file: /app/uploads/NAME."""
    return Path("/app/uploads") / Path(filename).name


def convert_filename_to_sandbox_shared_path(filename: Union[str, Path]) -> Path:
    """The sandbox path of a shared file: /app/shared/NAME."""
    return Path("/app/shared") / Path(filename).name


def get_upload_file_path(from_chat_key: str, file_name: str = "", use_suffix: str = "", seed: str = "") -> Path:
    """A host path for a new file of the chat's uploads: in the call's
    copy of its files (_ctx.fs), written back when the call ends."""
    import hashlib
    import time as _time

    name = file_name or hashlib.md5((seed or str(_time.time())).encode()).hexdigest() + use_suffix
    return convert_filename_to_access_path(name, from_chat_key)
