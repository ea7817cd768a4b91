"""_ctx.fs: files between the plugin and the sandbox, as seed 003 shows.

Sandbox paths are /app/shared/... (the sandbox's own files) and
/app/uploads/... (the chat's uploads, read-only to the code); "shared/x"
and "uploads/x" (relative to /app) mean the same. Anything else, and any
"..", is a ValueError.

The sandbox keeps running while a method does, and can swap any entry of
/app/shared for a symlink at any moment, so the plugin never gets a path
into the chat's real shared directory. Every resolution there walks down
from the directory one component at a time with O_NOFOLLOW (a symlink
anywhere is refused, never followed), and what the plugin gets is a
private copy in the call's staging directory (under the plugin process's
own temporary directory, mode 0700, removed when the call ends):
get_file("/app/shared/x") returns the snapshot of x, and fs.shared_path
is the staging directory itself. What the plugin creates or changes there
is written back into /app/shared when the call ends (and at once by
forward_file and mixed_forward_file), through the same walk: a planted
symlink in place of a file is replaced, not followed; one in place of a
directory fails the call, naming it. Deletions are not written back.

/app/uploads is read-only to sandboxed code (bubblewrap's --ro-bind,
Docker's :ro); only nekro and plugins write there, so upload_path is the
real directory and get_file returns real paths there, after the same
no-symlink walk.
"""
from __future__ import annotations

import base64
import errno
import hashlib
import os
import posixpath
import secrets
import shutil
import stat
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional, Tuple, Union

_AREAS = (("/app/shared", "shared"), ("/app/uploads", "uploads"))

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_PARTIAL = ".nekro-partial-"
_MAX_DEPTH = 64  # directories copied below a snapshot's root
_CHUNK = 1 << 20
_RECENT_NS = 2_000_000_000  # mtimes this close to a copy are checked by content

Rel = Tuple[str, ...]


class FileSystem:
    def __init__(self, chat_key: str, container_key: str, call: str = "", shared_path: str = "", upload_path: str = "",
                 holder=None):
        self.chat_key = chat_key
        self.container_key = container_key
        self._call = call
        self._shared = shared_path
        self._upload = upload_path
        # The object whose _stage is the call's staging area (the call's
        # AgentCtx); a FileSystem made on its own keeps its own.
        self._holder = holder if holder is not None else self
        if holder is None:
            self._stage = None

    def _staging(self) -> "_Stage":
        if not self._shared:
            raise ValueError("sandbox files are reachable only inside a sandbox method (from its _ctx)")
        h = self._holder
        stage = getattr(h, "_stage", None)
        if stage is None:
            stage = h._stage = _Stage(self._shared)
        return stage

    @property
    def shared_path(self) -> Path:
        """This call's staging directory for /app/shared: files written here
        reach the sandbox's /app/shared when the call ends (or at
        forward_file). Read the sandbox's files with get_file."""
        return Path(self._staging().root)

    @property
    def upload_path(self) -> Path:
        """The host directory the sandbox sees as /app/uploads (read-only to
        the sandbox)."""
        return Path(self._upload)

    def get_file(self, sandbox_path: Union[str, Path]) -> Path:
        """A host path holding the file at a sandbox path (AI -> plugin): for
        /app/shared a private snapshot taken now, for /app/uploads the file
        itself. A path with a symlink in it is a ValueError."""
        area, rel = _parse(sandbox_path)
        if area == "shared":
            return Path(self._staging().snapshot(rel, sandbox_path))
        if not self._upload:
            raise ValueError("sandbox files are reachable only inside a sandbox method (from its _ctx)")
        _check_no_symlink(self._upload, rel, sandbox_path)
        return Path(os.path.join(self._upload, *rel)) if rel else Path(self._upload)

    def forward_file(self, host_path: Union[str, Path]) -> str:
        """The sandbox path of a file in this call's shared staging
        directory (written back into /app/shared now) or in the chat's
        uploads directory (plugin -> AI)."""
        p = posixpath.normpath(os.path.abspath(os.fspath(host_path)))
        stage = getattr(self._holder, "_stage", None)
        if stage is not None:
            rel = _beneath(p, stage.root)
            if rel is not None:
                if not os.path.lexists(p):
                    raise FileNotFoundError('文件 "%s" 不存在' % host_path)
                stage.flush(rel)
                return _sandbox_path("/app/shared", rel)
        for prefix, base in (("/app/shared", self._shared), ("/app/uploads", self._upload)):
            rel = _beneath(p, base) if base else None
            if rel is not None:
                _check_no_symlink(base, rel, host_path, must_exist=True)
                return _sandbox_path(prefix, rel)
        raise ValueError('文件 "%s" 不在合法的应用共享目录或上传目录下' % host_path)

    async def mixed_forward_file(self, file: Union[str, bytes, Path], file_name: str = "") -> str:
        """Put a file into /app/shared and return its sandbox path: an http(s)
        URL (downloaded by nekro, private addresses refused), a data: URI,
        bytes, a file of this call's shared staging directory, or a host
        path in this chat's directories or the plugin's own data
        directory."""
        from nekro_agent import _link

        args = {"file_name": file_name or ""}
        if isinstance(file, (bytes, bytearray)):
            args["bytes"] = base64.b64encode(bytes(file)).decode("ascii")
        elif isinstance(file, str) and (file.startswith(("http://", "https://", "data:"))):
            args["url"] = file
        else:
            path = posixpath.normpath(os.path.abspath(os.fspath(file)))
            stage = getattr(self._holder, "_stage", None)
            if stage is not None and _beneath(path, stage.root) is not None:
                return self.forward_file(path)
            args["path"] = path
        prev = _link.current_call.set(self._call or _link.current_call.get())
        try:
            return await _link.get().request("fs.mixed_forward_file", **args)
        finally:
            _link.current_call.reset(prev)

    def __repr__(self) -> str:
        return "FileSystem(chat_key=%r, container_key=%r)" % (self.chat_key, self.container_key)


def _parse(sandbox_path) -> Tuple[str, Rel]:
    """The area and the components of a sandbox path."""
    p = os.fspath(sandbox_path) if isinstance(sandbox_path, os.PathLike) else str(sandbox_path)
    if "\x00" in p:
        raise ValueError("文件路径含有 NUL")
    if not p.startswith("/"):  # relative to /app
        p = "/app/" + (p[2:] if p.startswith("./") else p)
    if ".." in p.split("/"):
        raise ValueError('文件 "%s" 含有 "..":不在合法的沙盒内容共享目录或上传目录下' % sandbox_path)
    for prefix, area in _AREAS:
        if p == prefix or p.startswith(prefix + "/"):
            return area, tuple(c for c in p[len(prefix):].split("/") if c not in ("", "."))
    raise ValueError('文件 "%s" 不在合法的沙盒内容共享目录或上传目录下 (/app/shared/ 或 /app/uploads/)' % sandbox_path)


def _beneath(path: str, base: str) -> Optional[Rel]:
    """The components of path below base (lexically), or None."""
    base = posixpath.normpath(base)
    if path == base:
        return ()
    if path.startswith(base.rstrip("/") + "/"):
        return tuple(c for c in path[len(base):].split("/") if c)
    return None


def _sandbox_path(prefix: str, rel: Rel) -> str:
    return prefix + "".join("/" + c for c in rel)


class SymlinkRefused(ValueError):
    """A sandbox path leads through a symlink (never followed)."""


def _refuse(shown, rel: Rel, what: str = "a symlink") -> SymlinkRefused:
    return SymlinkRefused('文件 "%s": "%s" is %s; nekro does not follow symlinks in the sandbox\'s directories'
                          % (shown, "/".join(rel), what))


def _walk(base_fd: int, dirs: Rel, shown, create: bool = False, owner=None) -> int:
    """Open the directory base/dirs without following a symlink at any
    component (making missing ones when create). Returns a new fd."""
    fd = os.dup(base_fd)
    for i, name in enumerate(dirs):
        try:
            try:
                nfd = os.open(name, _DIR, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(name, 0o755, dir_fd=fd)
                    if owner:
                        os.chown(name, owner[0], owner[1], dir_fd=fd, follow_symlinks=False)
                except FileExistsError:
                    pass
                nfd = os.open(name, _DIR, dir_fd=fd)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                raise _refuse(shown, dirs[:i + 1], "a symlink or not a directory") from None
            raise
        os.close(fd)
        fd = nfd
    return fd


def _check_no_symlink(base: str, rel: Rel, shown, must_exist: bool = False) -> None:
    """Refuse a path below base that has a symlink in it; a missing one is
    fine unless must_exist."""
    try:
        base_fd = os.open(base, _DIR)
    except FileNotFoundError:
        if must_exist:
            raise FileNotFoundError('文件 "%s" 不存在' % shown) from None
        return
    try:
        if not rel:
            return
        try:
            fd = _walk(base_fd, rel[:-1], shown)
        except FileNotFoundError:
            if must_exist:
                raise FileNotFoundError('文件 "%s" 不存在' % shown) from None
            return
        try:
            st = os.stat(rel[-1], dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            if must_exist:
                raise FileNotFoundError('文件 "%s" 不存在' % shown) from None
            return
        finally:
            os.close(fd)
        if stat.S_ISLNK(st.st_mode):
            raise _refuse(shown, rel)
    finally:
        os.close(base_fd)


def _copy(src_fd: int, dst_fd: int) -> str:
    """Copy src into dst; return the content's digest."""
    h = hashlib.sha256()
    while True:
        b = os.read(src_fd, _CHUNK)
        if not b:
            return h.hexdigest()
        h.update(b)
        view = memoryview(b)
        while view:
            view = view[os.write(dst_fd, view):]


def _digest(fd: int) -> str:
    h = hashlib.sha256()
    while True:
        b = os.read(fd, _CHUNK)
        if not b:
            return h.hexdigest()
        h.update(b)


class _Stage:
    """One call's private copy of the /app/shared it touched."""

    def __init__(self, real: str):
        self.real = real
        self.dir = tempfile.mkdtemp(prefix="nekro-call-")  # mode 0700, in the process's own TMPDIR
        self.root = os.path.join(self.dir, "shared")
        os.mkdir(self.root, 0o700)
        # What the stage holds as the sandbox had it (copied in or written
        # back): rel -> (size, mtime_ns, digest, when) of the staged file.
        self.known = {}
        # Directories made in the stage only to hold a snapshot: they
        # exist in /app/shared already and are not written back.
        self.parents = set()
        self.lock = threading.RLock()

    # ---- in: snapshots ----

    def snapshot(self, rel: Rel, shown) -> str:
        dst = os.path.join(self.root, *rel)
        with self.lock:
            if rel in self.known or (rel and os.path.lexists(dst)):
                return dst  # a call sees one snapshot, and what it wrote since
            self.parents.update(rel[:i] for i in range(len(rel)))
            try:
                base_fd = os.open(self.real, _DIR)
            except FileNotFoundError:
                return dst
            try:
                try:
                    dir_fd = _walk(base_fd, rel[:-1], shown)
                except FileNotFoundError:
                    return dst
                try:
                    src = os.open(rel[-1], _READ, dir_fd=dir_fd) if rel else os.dup(base_fd)
                except FileNotFoundError:
                    return dst
                except OSError as e:
                    if e.errno == errno.ELOOP:
                        raise _refuse(shown, rel) from None
                    raise
                finally:
                    os.close(dir_fd)
                try:
                    self._take(src, rel, shown, 0)
                finally:
                    os.close(src)
            finally:
                os.close(base_fd)
        return dst

    def _stage_dir(self, rel: Rel) -> int:
        fd = os.open(self.root, _DIR)
        try:
            return _walk(fd, rel, rel, create=True)
        finally:
            os.close(fd)

    def _take(self, src: int, rel: Rel, shown, depth: int) -> None:
        """Copy the open entry src (at rel) into the stage."""
        st = os.fstat(src)
        if stat.S_ISDIR(st.st_mode):
            if depth > _MAX_DEPTH:
                raise ValueError('文件 "%s": directories nested more than %d deep' % (shown, _MAX_DEPTH))
            os.close(self._stage_dir(rel))
            self.known[rel] = None
            for name in os.listdir(src):
                try:
                    child = os.open(name, _READ, dir_fd=src)
                except OSError as e:
                    if e.errno in (errno.ELOOP, errno.ENOENT):
                        continue  # symlinks are left out of a directory's copy
                    raise
                try:
                    self._take(child, rel + (name,), shown, depth + 1)
                finally:
                    os.close(child)
            return
        if not stat.S_ISREG(st.st_mode):
            if depth == 0:
                raise ValueError('文件 "%s" is not a regular file or directory' % shown)
            return
        parent = self._stage_dir(rel[:-1])
        try:
            dst = os.open(rel[-1], _CREATE, 0o600, dir_fd=parent)
            try:
                digest = _copy(src, dst)
                os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
                got = os.fstat(dst)
            finally:
                os.close(dst)
        finally:
            os.close(parent)
        self.known[rel] = (got.st_size, got.st_mtime_ns, digest, time.time_ns())

    # ---- out: writing back ----

    def flush(self, rel: Rel = ()) -> None:
        """Write what the plugin created or changed at or below rel in the
        stage back into the real /app/shared."""
        with self.lock:
            try:
                src = os.open(os.path.join(self.root, *rel), _READ)
            except FileNotFoundError:
                return
            try:
                self._out(src, rel)
            finally:
                os.close(src)

    def _out(self, src: int, rel: Rel) -> None:
        st = os.fstat(src)
        if stat.S_ISDIR(st.st_mode):
            if rel and rel not in self.known and rel not in self.parents:
                fd, _ = self._real_dir(rel, create=True)
                os.close(fd)
            for name in sorted(os.listdir(src)):
                try:
                    child = os.open(name, _READ, dir_fd=src)
                except OSError as e:
                    if e.errno in (errno.ELOOP, errno.ENOENT):
                        continue  # a symlink the plugin made stays in its stage
                    raise
                try:
                    self._out(child, rel + (name,))
                finally:
                    os.close(child)
            return
        if not stat.S_ISREG(st.st_mode) or not rel:
            return
        if self._unchanged(src, st, rel):
            return
        self._put(src, st, rel)

    def _unchanged(self, fd: int, st, rel: Rel) -> bool:
        k = self.known.get(rel)
        if not k or k[0] != st.st_size or k[1] != st.st_mtime_ns:
            return False
        size, mtime, digest, when = k
        if mtime < when - _RECENT_NS:
            return True  # a write since would have moved the mtime
        os.lseek(fd, 0, os.SEEK_SET)
        same = _digest(fd) == digest
        os.lseek(fd, 0, os.SEEK_SET)
        return same

    def _owner(self, base_fd: int):
        """Who owns what the host creates in /app/shared: the sandbox's
        user, so its code can change it."""
        if os.geteuid() != 0:
            return None
        st = os.fstat(base_fd)
        return None if (st.st_uid, st.st_gid) == (0, 0) else (st.st_uid, st.st_gid)

    def _real_dir(self, rel: Rel, create: bool):
        os.makedirs(self.real, 0o755, exist_ok=True)
        base_fd = os.open(self.real, _DIR)
        try:
            owner = self._owner(base_fd)
            return _walk(base_fd, rel, _sandbox_path("/app/shared", rel), create=create, owner=owner), owner
        finally:
            os.close(base_fd)

    def _put(self, src: int, st, rel: Rel) -> None:
        """Write the staged file src over /app/shared/rel: a partial file
        renamed into place, which replaces (never follows) whatever the
        sandbox left there."""
        shown = _sandbox_path("/app/shared", rel)
        dir_fd, owner = self._real_dir(rel[:-1], create=True)
        try:
            tmp = _PARTIAL + secrets.token_hex(8)
            out = os.open(tmp, _CREATE, 0o600, dir_fd=dir_fd)
            try:
                os.lseek(src, 0, os.SEEK_SET)
                digest = _copy(src, out)
                if owner:
                    os.fchown(out, owner[0], owner[1])
                os.fchmod(out, (st.st_mode & 0o777) | 0o600)
            except BaseException:
                os.close(out)
                os.unlink(tmp, dir_fd=dir_fd)
                raise
            os.close(out)
            try:
                os.rename(tmp, rel[-1], src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except OSError as e:
                os.unlink(tmp, dir_fd=dir_fd)
                if e.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
                    raise ValueError('文件 "%s": a directory is there; the plugin\'s file was not written' % shown) from None
                raise
        finally:
            os.close(dir_fd)
        self.known[rel] = (st.st_size, st.st_mtime_ns, digest, time.time_ns())

    def close(self) -> None:
        """Write back what changed, then remove the stage (even when the
        write-back fails)."""
        try:
            self.flush()
        finally:
            self.discard()

    def discard(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
