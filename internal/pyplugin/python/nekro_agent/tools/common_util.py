"""The reference's common helpers plugins use (nekro_agent.tools.common_util)."""
from __future__ import annotations

import difflib
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any, Tuple

from nekro_agent import _unavailable

__all__ = ["calculate_file_md5", "calculate_text_similarity", "compare_semver", "copy_to_upload_dir",
           "download_file", "get_app_version", "limited_text_output"]


def get_app_version() -> str:
    return "nekro"


def compare_semver(a: str, b: str) -> int:
    def parts(v: str):
        return [int(p) if p.isdigit() else 0 for p in v.lstrip("v").split("-")[0].split(".")]

    pa, pb = parts(a), parts(b)
    return (pa > pb) - (pa < pb)


def limited_text_output(text: str, limit: int = 1000, placeholder: str = "...") -> str:
    """text, its middle cut to placeholder when longer than limit."""
    if len(text) <= limit:
        return text
    left = limit // 2 - len(placeholder) // 2
    return text[:left] + placeholder + text[-(limit - left):]


def calculate_text_similarity(text1: str, text2: str, min_length: int = 12) -> float:
    """0..1; 0 when either text is shorter than min_length."""
    if len(text1) < min_length or len(text2) < min_length:
        return 0
    return difflib.SequenceMatcher(None, text1, text2).ratio()


async def calculate_file_md5(file_path: str, strict: bool = False) -> str:
    """A file's MD5 (a URL's own MD5 for a URL); the path itself when the
    file cannot be read (unless strict)."""
    from nekro_agent.tools.path_convertor import is_url_path

    if is_url_path(file_path):
        return hashlib.md5(file_path.encode()).hexdigest()
    try:
        h = hashlib.md5()
        with open(file_path, "rb") as f:
            for chunk in iter(lambda: f.read(65536), b""):
                h.update(chunk)
        return h.hexdigest()
    except OSError:
        if strict:
            raise
        return file_path


async def download_file(url: str, file_path: str = "", file_name: str = "", use_suffix: str = "",
                        retry_count: int = 3, from_chat_key: str = "") -> Tuple[str, str]:
    """Download url to file_path (or to a file of the plugin process's own
    temporary directory); returns (path, name)."""
    import asyncio
    import urllib.request

    def fetch() -> bytes:
        with urllib.request.urlopen(url, timeout=60) as r:  # noqa: S310 - the plugin's own request
            return r.read()

    last: Any = None
    for _ in range(max(1, retry_count + 1)):
        try:
            content = await asyncio.get_running_loop().run_in_executor(None, fetch)
            break
        except Exception as e:  # noqa: BLE001 - retried, then raised
            last = e
    else:
        raise last
    if not file_path:
        name = file_name or hashlib.md5(content).hexdigest() + use_suffix
        d = Path(tempfile.gettempdir()) / "downloads"
        d.mkdir(parents=True, exist_ok=True)
        file_path = str(d / name)
    Path(file_path).write_bytes(content)
    return file_path, os.path.basename(file_path)


copy_to_upload_dir = _unavailable.function(
    "copy_to_upload_dir", "files reach the sandbox through _ctx.fs (forward_file, mixed_forward_file)")
