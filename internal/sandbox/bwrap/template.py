# nekro's shared sandbox template (Runner.Template): trusted code, one
# process per runner, started by nekro (template.go) as root of a user
# namespace of its own, whose uid and gid maps give its root a dedicated
# host uid (the last of the chats' range, never a chat's) and the rest of
# the chats' range 1:1, and as pid 1 of a PID namespace owned by that user
# namespace. It holds the standard library, boot.py's functions and
# nothing of any chat: its memory is every run's memory (a run can read it
# through `import __main__` or gc), and its environment is the runs' own
# (CFG["env"]: fixed paths and locale).
#
# For each fresh run the host sends, on the control socket (fd 3), a JSON
# request and descriptors: the request's socket, the output pipe, the
# release and ready pipes of boot.py's protocol, the run's RPC connection,
# the run's files (memfds) and, if any, matplotlib's font cache. The
# template unshares a PID namespace for its next child and forks it: the
# child is pid 1 of that namespace and builds the run's whole isolation
# (_isolate: mount, IPC, UTS, cgroup and network namespaces, a root of its
# own from read-only binds, the chat's directories opened without following
# a symlink, /tmp, /dev/shm, /proc, a minimal /dev, pivot_root, lo, no
# capability, the chat's uid, no_new_privs, the strict seccomp filter; the
# root and the network namespace from those the chat's earlier runs left
# with the template, when it keeps them), then runs boot.py's _run: the
# same protocol as a fresh bwrap sandbox.
# The template answers on the request's socket with the child's pidfd, and
# writes the child's exit status there once it has reaped it.
#
# argv: template.py CONFIG_JSON; fd 3 control socket, fd 4 the runs'
# seccomp filter, fd 6 boot.py.
import ctypes
import json
import os
import select
import signal
import socket
import struct
import sys
import time

CFG = json.loads(sys.argv[1])
CTL_FD, SECCOMP_FD, BOOT_FD = 3, 4, 6

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
libc.syscall.restype = ctypes.c_long

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x20000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_MOVE = 32, 1024, 2048, 4096, 8192
MS_REC, MS_PRIVATE, MS_RELATIME = 0x4000, 1 << 18, 1 << 21
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_KEEPCAPS = 1, 4, 8
PR_CAPBSET_READ, PR_CAPBSET_DROP = 23, 24
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}[os.uname().machine]
SYS_OPENAT2 = 437
O_PATH = 0o10000000
RESOLVE_NO_SYMLINKS, RESOLVE_BENEATH = 0x04, 0x08


def _chk(ret, what):
    if ret != 0:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (what, os.strerror(e)))


def _prctl(op, a=0, b=0, c=0, d=0):
    return libc.prctl(op, a, b, c, d)


def _mount(src, target, fstype, flags, data=None):
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    _chk(libc.mount(enc(src), enc(target), enc(fstype), flags, enc(data)), "mount " + target)


# statvfs flags a user namespace may not clear on a mount it did not make
# (the kernel locks them), and the mount flags that keep them.
_LOCKED = ((1, MS_RDONLY), (2, MS_NOSUID), (4, MS_NODEV), (8, MS_NOEXEC),
           (1024, MS_NOATIME), (2048, MS_NODIRATIME), (4096, MS_RELATIME))


def _bind(src_fd, target, ro, reopen=None, dev=False):
    """Binds the file or directory open as src_fd onto target (a path in
    the new root, made by the template, or a descriptor's magic link),
    read-only when ro, keeping the flags of the source's mount the user
    namespace may not clear. reopen opens the new mount (O_PATH) for its
    remount; by default target, without following a symlink."""
    src = "/proc/self/fd/%d" % src_fd
    try:
        _mount(src, target, None, MS_BIND)
    except OSError as e:
        # A tree holding mounts the namespace may not reveal apart is
        # refused (EINVAL): bind it whole, as bwrap does.
        if e.errno != 22:
            raise
        _mount(src, target, None, MS_BIND | MS_REC)
    fd = reopen() if reopen else os.open(target, O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        flags = MS_NOSUID if dev else MS_NOSUID | MS_NODEV
        st = os.fstatvfs(fd).f_flag
        for f, m in _LOCKED:
            if st & f:
                flags |= m
        if ro:
            flags |= MS_RDONLY
        _mount(None, "/proc/self/fd/%d" % fd, None, MS_REMOUNT | MS_BIND | flags)
    finally:
        os.close(fd)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _open_beneath(dirfd, rel):
    """Opens rel beneath dirfd (O_PATH) without following any symlink and
    without leaving dirfd: a chat's directories are the chat's to change,
    and this process may reach what the chat's uid may not."""
    how = _OpenHow(O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, 0, RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH)
    fd = libc.syscall(SYS_OPENAT2, dirfd, rel.encode(), ctypes.byref(how), ctypes.sizeof(how))
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, "open %s without following symlinks: %s" % (rel, os.strerror(e)))
    return fd


def _open_chat_dir(anchor, rel):
    """A chat's directory, rel beneath anchor (nekro's data directory)."""
    a = os.open(anchor, O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return _open_beneath(a, rel)
    finally:
        os.close(a)


def _bounding_set():
    caps = []
    for cap in range(64):
        r = _prctl(PR_CAPBSET_READ, cap)
        if r < 0:
            break
        if r == 1:
            caps.append(cap)
    return caps


_BOUNDING = _bounding_set()
_CAP_HDR = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
_CAP_NONE = (ctypes.c_uint32 * 6)()

with os.fdopen(SECCOMP_FD, "rb") as _f:
    _FILTER = _f.read()


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_FILTER_BUF = ctypes.create_string_buffer(_FILTER, max(len(_FILTER), 1))
_FILTER_PROG = _SockFprog(len(_FILTER) // 8, ctypes.addressof(_FILTER_BUF))

# boot.py's functions, without running it: each run calls its _run. Its
# __builtins__ is the module, as when boot.py runs as __main__ (the run's
# globals get the same).
import builtins  # noqa: E402

BOOT = {"__builtins__": builtins}
with os.fdopen(BOOT_FD, "rb") as _f:
    exec(compile(_f.read().decode().replace("\n_run()\n", "\n"), "/app/.nekro/boot.py", "exec"), BOOT)
del _f

# What boot.py, the stubs and the isolation import, loaded once.
import __future__  # noqa: E402,F401 - the stubs' first line imports it
import _sitebuiltins  # noqa: E402,F401
import fcntl  # noqa: E402
import linecache  # noqa: E402,F401
import resource  # noqa: E402,F401
import traceback  # noqa: E402,F401
import threading  # noqa: E402
import atexit  # noqa: E402
import types  # noqa: E402


def _lo_up():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ifr = struct.pack("16sH14x", b"lo", 0x1 | 0x8 | 0x40)  # IFF_UP|IFF_LOOPBACK|IFF_RUNNING
        fcntl.ioctl(s.fileno(), 0x8914, ifr)  # SIOCSIFFLAGS
    finally:
        s.close()


def _write_file(path, data, mode, uid=-1):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        os.write(fd, data)
        if uid >= 0:
            os.fchown(fd, uid, uid)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _read_fd(fd):
    size = os.fstat(fd).st_size
    return os.pread(fd, size, 0) if size else b""


def _isolate(req, fds):
    """Builds the run's isolation in this process (pid 1 of its new PID
    namespace) and returns the descriptors boot.py is given. Runs as the
    user namespace's root; ends as the chat's uid with no capability and
    the strict filter."""
    uid = req["uid"]
    net = req["network"]
    netns = req.get("_netns")  # the chat's kept network namespace, if any
    mntns = req.get("_mntns")  # the chat's kept base mount namespace, if any
    flags = CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP
    if not net:
        if netns is not None:
            _chk(libc.setns(netns, CLONE_NEWNET), "join the chat's network namespace")
        else:
            flags |= CLONE_NEWNET
    joined = mntns is not None and _join_base(req, *mntns)
    _chk(libc.unshare(flags | CLONE_NEWNS), "unshare")
    if not joined:
        _build_base(req, net, fds)
        _keep(b"mnt", _mntns_key(req) + " " + req["files_key"], "/proc/self/ns/mnt", "/")
        _chk(libc.unshare(CLONE_NEWNS), "unshare the base")
    # A copy of the chat's base of its own: what the run mounts stays out
    # of the base, which the chat's other runs copy.
    _run_mounts(req, fds)
    if not net and netns is None:
        _lo_up()
        _keep(b"net", _netns_key(req), "/proc/self/ns/net")
    # The chat's uid, no capability left or to be regained.
    # (The bounding set is empty already: main emptied the template's.)
    _chk(_prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL), "clear ambient caps")
    _chk(_prctl(PR_SET_KEEPCAPS, 0), "keepcaps")
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    _chk(libc.capset(_CAP_HDR, _CAP_NONE), "capset")
    # After the uid change, which clears it: the run dies with the template.
    _chk(_prctl(PR_SET_PDEATHSIG, signal.SIGKILL), "pdeathsig")
    _chk(_prctl(PR_SET_NO_NEW_PRIVS, 1), "no_new_privs")
    if _FILTER:
        _chk(_prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(_FILTER_PROG)), "seccomp")
    # Dumpable as a fresh run is: its /proc/self belongs to its own uid.
    # Nothing of the template's is secret (see the head of this file).
    _prctl(PR_SET_DUMPABLE, 1)
    os.chdir("/app")


def _build_base(req, net, fds):
    """Builds, in a new mount namespace, the chat's base root and enters
    it (pivot_root): the system's paths, the chat's directories, the run's
    files and /dev, all that does not change between the chat's runs, with
    empty mount points for what does (/tmp, /dev/pts, /dev/shm) and a
    /proc every run replaces (a namespace may mount a new proc only where
    one is visible already)."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    # Every source is opened in the new mount namespace (a bind needs its
    # source there), before the new root covers anything. The system's
    # paths are nekro's; the chat's are opened beneath the data directory
    # without following a symlink.
    src = {}
    for p in CFG["ro"] + (CFG["net_ro"] if net else []):
        try:
            src[p] = os.open(p, O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            pass
    dev = {}
    for n in ("null", "zero", "full", "random", "urandom", "tty"):
        dev[n] = os.open("/dev/" + n, O_PATH | os.O_CLOEXEC)
    shared = _open_chat_dir(*req["shared"])
    packages = _open_beneath(shared, ".packages")
    uploads = _open_chat_dir(*req["uploads"])

    r = "/tmp"
    _mount("tmpfs", r, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    os.chdir(r)
    os.mkdir("usr")
    _bind(src.pop("/usr"), "usr", True)
    for link, to in (("bin", "usr/bin"), ("sbin", "usr/sbin"), ("lib", "usr/lib"), ("lib64", "usr/lib64")):
        os.symlink(to, link)
    os.mkdir("etc")
    for p, fd in src.items():
        target = p.lstrip("/")
        parent = os.path.dirname(target)
        if parent:
            os.makedirs(parent, exist_ok=True)
        if os.path.isdir("/proc/self/fd/%d" % fd):
            os.mkdir(target)
        else:
            _write_file(target, b"", 0o444)
        _bind(fd, target, True)
        os.close(fd)
    # /app: the chat's directories, then its package layer read-only over
    # the shared one (opened through the new bind, without a symlink).
    os.makedirs("app/shared")
    os.mkdir("app/uploads")
    os.mkdir("app/.nekro")
    _nekro_files(req, fds)
    _bind(shared, "app/shared", False)
    os.close(shared)
    tshared = os.open("app/shared", O_PATH | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
    tpk = _open_beneath(tshared, ".packages")
    _bind(packages, "/proc/self/fd/%d" % tpk, True, lambda: _open_beneath(tshared, ".packages"))
    for fd in (tshared, tpk, packages):
        os.close(fd)
    _bind(uploads, "app/uploads", True)
    os.close(uploads)
    os.mkdir("tmp")
    os.mkdir("proc")
    _mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    # A minimal /dev, as bwrap's --dev, read-only but its shared memory.
    os.mkdir("dev")
    _mount("tmpfs", "dev", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
    for n, fd in dev.items():
        _write_file("dev/" + n, b"", 0o666)
        _bind(fd, "dev/" + n, False, dev=True)
        os.close(fd)
    for link, to in (("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2"),
                     ("fd", "/proc/self/fd"), ("core", "/proc/kcore"), ("ptmx", "pts/ptmx")):
        os.symlink(to, "dev/" + link)
    os.mkdir("dev/pts")
    os.mkdir("dev/shm")
    _mount(None, "dev", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    # The new root; the host's is gone from this namespace.
    _chk(libc.syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
    _chk(libc.umount2(b".", MNT_DETACH), "detach the old root")
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _join_base(req, mntns, root):
    """Enters the chat's kept base mount namespace (mntns, its root open
    as root) if its binds still show the directories the chat has now: the
    same shared directory, package layer and uploads (device and inode,
    which the base's binds pin: no other directory can take them while it
    lives; a volume mounted again is the same live filesystem), the layer
    and uploads read-only (a layer the host replaced has lost its bind).
    Checked from here, through root, before joining: a run cannot come
    back from the base to the host's namespace. Otherwise returns False:
    the run builds a new base, which replaces the kept one."""
    now, base = [], []
    try:
        try:
            now.append(_open_chat_dir(*req["shared"]))
            now.append(_open_beneath(now[0], ".packages"))
            now.append(_open_chat_dir(*req["uploads"]))
            for p in ("app/shared", "app/shared/.packages", "app/uploads"):
                base.append(_open_beneath(root, p))
        except OSError:
            return False  # the build reports the chat's own errors
        for i, (x, y) in enumerate(zip(map(os.fstat, now), map(os.fstat, base))):
            if (x.st_dev, x.st_ino) != (y.st_dev, y.st_ino) or (i > 0 and not os.fstatvfs(base[i]).f_flag & 1):
                return False
    finally:
        for fd in now + base:
            os.close(fd)
    _chk(libc.setns(mntns, CLONE_NEWNS), "join the chat's base mount namespace")
    return True


def _nekro_files(req, fds):
    """Writes the run's files, as bwrap's --ro-bind-data does, into a tmpfs
    of their own at app/.nekro (beneath the current directory), read-only
    once written. They are the same for every run of the chat while the
    request's files_key is: the base holds them (_build_base), and a run
    joins a base only with the same key (_kept_for)."""
    files = req["files"]
    size = sum(os.fstat(fds[i]).st_size for i in range(len(files))) + (64 << 10) * (len(files) + 1)
    _mount("tmpfs", "app/.nekro", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=%d" % size)
    for i, name in enumerate(files):
        path = "app/.nekro/" + name
        d = os.path.dirname(path)
        if not os.path.isdir(d):
            os.makedirs(d, 0o755)
        _write_file(path, _read_fd(fds[i]), 0o555 if name.startswith("bin/") else 0o444)
    _mount(None, "app/.nekro", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _run_mounts(req, fds):
    """Mounts, in the run's own copy of its chat's base (the current
    root), what is the run's alone: /proc of its PID namespace, /tmp,
    /dev/pts and /dev/shm."""
    os.chdir("/")
    uid, tmp = req["uid"], req["tmp"]
    files = req["files"]
    # The run's /proc in place of the base's (whose PID namespace is the
    # run's that built it): mounted aside while the base's is still
    # visible, which allows it, then moved over.
    _mount("proc", "tmp", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _chk(libc.umount2(b"proc", MNT_DETACH), "detach the base's /proc")
    _mount("tmp", "proc", None, MS_MOVE)
    for p in ("sys", "sysrq-trigger", "irq", "bus"):  # as bwrap's --proc
        try:
            pfd = os.open("proc/" + p, O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue
        _bind(pfd, "proc/" + p, True)
        os.close(pfd)
    # /tmp and /dev/shm sized by the limits; matplotlib's font cache.
    _mount("tmpfs", "tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=%d" % tmp)
    if req.get("font"):
        os.mkdir("tmp/.matplotlib", 0o755)
        os.chown("tmp/.matplotlib", uid, uid)
        _write_file("tmp/.matplotlib/" + req["font"], _read_fd(fds[len(files)]), 0o444, uid)
    _mount("devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620")
    _mount("tmpfs", "dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=%d" % tmp)


# Namespaces kept per chat, by kind: b"net" and b"mnt".
#
# Network namespaces. A fresh network namespace costs 0.6-1.3 ms of CPU to
# make and tear down (the teardown in a kernel worker, outside the runs'
# cgroups); the runs of one chat share one, as a zygote's runs do, while
# the chat keeps running code. It holds only lo, and a run can change
# nothing in it (no capability): what one run of the chat leaves there is
# at most a socket of one of its processes, which die with the run.
#
# Base mount namespaces. A run's root is mostly the same for every run of
# its chat: the system's read-only binds, the chat's directories, /dev.
# Building it from a copy of the host's mounts (hundreds, which the
# unshare copies, MS_PRIVATE walks and the old root's detach frees) is
# most of a run's isolation; a later run of the chat joins the chat's
# base (_join_base, which checks it still binds the chat's directories),
# unshares a copy of its ~30 mounts and mounts only what is its own
# (_run_mounts): no run's /proc, /tmp, /dev/pts or /dev/shm is in the
# base. The run's files (/app/.nekro, read-only) are: they are the same
# for all of the chat's runs while its plugin configuration is, and a run
# joins the base only when they are the ones it holds (the request's
# files_key, the runner's name for their content), else it builds a new
# one. The chat's key among them is that of the chat whose directories
# the base binds, which _join_base checks. A base would keep the chat's
# directories' filesystems alive (its volumes' loop devices bound) after
# nekro unmounts them: nekro has it dropped first (a "drop" request:
# _drop_bases).
#
# Chats never share one: the key is the chat's uid, which no other chat
# has (and which is all a run learns of the other chats from the
# template's memory: no key, no path); a base is joined only if it binds
# the directories the run's request names. The first run of a chat makes
# each and sends it here (_keep, on _KEEP_CHILD, before it drops its
# privileges); the template keeps up to _KEPT_MAX of each kind, each until
# it has gone _KEPT_IDLE seconds unused, and a base no longer than
# _BASE_AGE seconds: its binds of the system's files (/etc/ld.so.cache,
# /etc/resolv.conf, ...) are of the files as they were when it was built,
# which a package upgrade or the resolver may since have replaced.
_KEPT = {b"net": {}, b"mnt": {}}  # kind -> key -> [fds, last use, made (monotonic)]
_KEPT_FDS = {b"net": 1, b"mnt": 2}  # the namespace; the base's root
_KEPT_MAX = 256
_KEPT_IDLE = 300.0
_BASE_AGE = 300.0
_KEEP_PARENT, _KEEP_CHILD = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


def _netns_key(req):
    return str(int(req["uid"]))


def _mntns_key(req):
    # A run with the network binds the resolver's files too.
    return str(int(req["uid"])) + ("n" if req.get("network") else "")


def _keep(kind, key, path, root=None):
    """Sends the namespace at path (this run's new one), and the directory
    root opened in it, to the template for the chat's next runs (best
    effort: a run that cannot still runs)."""
    fds = []
    try:
        fds.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
        if root is not None:
            fds.append(os.open(root, O_PATH | os.O_DIRECTORY | os.O_CLOEXEC))
        socket.send_fds(_KEEP_CHILD, [kind + b" " + key.encode()], fds)
    except OSError:
        pass
    finally:
        for fd in fds:
            os.close(fd)


def _kept_received():
    """Keeps a namespace a run sent (_keep). Of two network namespaces
    of a chat (two first runs at once) the first one kept serves, as runs
    already share it; a base mount namespace replaces the kept one, which
    its sender found stale (or, two first runs at once, is as good)."""
    try:
        msg, fds, _flags, _addr = socket.recv_fds(_KEEP_PARENT, 1 << 12, 2, socket.MSG_DONTWAIT)
    except (BlockingIOError, InterruptedError):
        return
    kind, _, key = msg.partition(b" ")
    key, _, files_key = key.partition(b" ")  # a base's, its files' key
    kept = _KEPT.get(kind)
    if kept is None or len(fds) != _KEPT_FDS[kind] or (kind == b"net" and key in kept):
        for fd in fds:
            os.close(fd)
        return
    old = kept.get(key)
    if old is not None:
        for fd in old[0]:
            os.close(fd)
    now = time.monotonic()
    kept[key] = [fds, now, now, files_key]


def _kept_for(kind, key, files_key=None):
    """The kept namespace of kind under key (its descriptors, which the
    run's child inherits), or None; forgets those unused too long, bases
    kept too long, and the least recently used past the bound. A base
    serves only a run whose files are those it holds (files_key): for
    another the run builds a new base, which replaces it."""
    kept = _KEPT[kind]
    now = time.monotonic()
    age = _BASE_AGE if kind == b"mnt" else float("inf")
    drop = [k for k, v in kept.items() if now - v[1] > _KEPT_IDLE or now - v[2] > age]
    while len(kept) - len(drop) > _KEPT_MAX:
        drop.append(min((k for k in kept if k not in drop), key=lambda k: kept[k][1]))
    for k in drop:
        for fd in kept.pop(k)[0]:
            os.close(fd)
    e = kept.get(key.encode())
    if e is None or (files_key is not None and e[3] != files_key.encode()):
        return None
    e[1] = now
    return e[0]


def _drop_bases(dev, ino):
    """Drops the kept bases whose /app/shared is the directory dev and ino
    name: nekro is about to unmount the chat's volumes, whose filesystems
    (and loop devices) a base would keep alive."""
    kept = _KEPT[b"mnt"]
    for k, v in list(kept.items()):
        try:
            fd = _open_beneath(v[0][1], "app/shared")
            try:
                st = os.fstat(fd)
            finally:
                os.close(fd)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (dev, ino):
            for fd in kept.pop(k)[0]:
                os.close(fd)


def _system_exit_code(e):
    c = e.code
    if c is None:
        return 0
    if isinstance(c, int):
        return c & 0xFF
    try:
        sys.stderr.write(str(c) + "\n")
    except BaseException:  # noqa: BLE001
        pass
    return 1


def _child(box):
    """The run: pid 1 of its PID namespace; never returns. box holds its
    request and descriptors and is emptied: once the run's code runs, no
    frame or object of the template's holds the request (its host paths);
    the code could walk the stack (sys._getframe) or the garbage collector
    to them."""
    req, fds = box
    box.clear()
    # fds: the run's files (and font cache), then out, release, ready, conn.
    out = high = None
    try:
        nfiles = len(req["files"]) + (1 if req.get("font") else 0)
        out, release, ready, conn = fds[nfiles:nfiles + 4]
        os.setsid()
        _isolate(req, fds)
        _KEEP_CHILD.detach()  # its descriptor is closed below with the template's others
        # boot.py's descriptors: 3 release, 4 ready, 5 the RPC connection;
        # stdout and stderr the output pipe, stdin /dev/null.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100) for fd in (out, release, ready, conn)]
        for fd in fds:
            os.close(fd)
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(high[0], 1)
        os.dup2(high[0], 2)
        for i, fd in enumerate(high[1:]):
            os.dup2(fd, 3 + i)
        os.closerange(6, 1 << 20)
        sys.argv[:] = ["/app/.nekro/boot.py", str(req["memory"]), str(req["file"]), str(req["processes"]), "3", "4", "5"]
        if req.get("site") is not None:
            sys.argv.append(req["site"])
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.modules["__main__"] = types.ModuleType("__main__")
    except BaseException as e:  # noqa: BLE001 - a run that is not isolated runs nothing
        msg = ("nekro: the sandbox template could not isolate the run: %s\n" % e).encode()
        for fd in (high[0] if high else out, 2 if high else out):
            try:
                os.write(fd, msg)
                break
            except BaseException:  # noqa: BLE001
                pass
        os._exit(125)
    del req, fds
    code = 0
    try:
        BOOT["_run"]()
    except SystemExit as e:
        code = _system_exit_code(e)
    except BaseException:  # noqa: BLE001 - as the interpreter would: report, exit 1
        try:
            traceback.print_exc()
        except BaseException:  # noqa: BLE001
            pass
        code = 1
    # What the interpreter does at exit: join threads, run atexit
    # handlers, flush.
    try:
        threading._shutdown()
    except BaseException:  # noqa: BLE001
        pass
    try:
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        pass
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except BaseException:  # noqa: BLE001
            pass
    os._exit(code)


# The request sockets of live runs, by pid: _reap writes a run's exit
# status there (a negative number for a signal).
_RUNS = {}

# The signal wake-up pipe (main): Python runs a signal's handler between
# bytecodes, so a SIGCHLD that lands after the loop last looked and
# before select sleeps would wait, unreaped, for the next request; and the
# run's result with it (a run's status is what _reap sends). The signal
# also writes to this pipe, which select watches.
_WAKE = []


def _reap(_signum, _frame):
    while True:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        s = _RUNS.pop(pid, None)
        if s is None:
            continue
        code = os.WEXITSTATUS(st) if os.WIFEXITED(st) else -os.WTERMSIG(st)
        try:
            s.send(b"%d" % code)
        except OSError:
            pass
        s.close()


def _serve(ctl, own_pid_ns, msg, fds):
    """Forks the run of one request. Returns, in the child only, the
    request and the run's descriptors (the caller unwinds to the module's
    frame and calls _child); None in the template."""
    try:
        req = json.loads(msg)
        if "drop" in req:
            for fd in fds:
                os.close(fd)
            fds = []
            _drop_bases(*req["drop"])
            return None
        reply = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, 0, fds[0])
        netns = None if req.get("network") else _kept_for(b"net", _netns_key(req))
        req["_netns"] = netns[0] if netns else None
        req["_mntns"] = _kept_for(b"mnt", _mntns_key(req), req["files_key"])
    except (ValueError, OSError, IndexError, KeyError, TypeError):
        for fd in fds:
            os.close(fd)
        return None
    run_fds = fds[1:]
    pid = -1
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
    try:
        _chk(libc.unshare(CLONE_NEWPID), "unshare")  # for the next child only
        pid = os.fork()
        if pid == 0:
            try:
                signal.set_wakeup_fd(-1)
                for fd in _WAKE:
                    os.close(fd)
                ctl.close()
                reply.close()
                _KEEP_PARENT.close()
                for s in _RUNS.values():  # other runs' sockets
                    s.close()
                _RUNS.clear()
                os.close(own_pid_ns)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGCHLD])
            except BaseException:  # noqa: BLE001
                os._exit(125)
            return [req, run_fds]
        _chk(libc.setns(own_pid_ns, CLONE_NEWPID), "setns")
        # The pidfd goes first, before _reap (blocked until then) may write
        # the status.
        try:
            pidfd = os.pidfd_open(pid)
            try:
                socket.send_fds(reply, [b"ok"], [pidfd])
            finally:
                os.close(pidfd)
            _RUNS[pid] = reply
        except OSError:
            os.kill(pid, signal.SIGKILL)
            reply.close()
    except OSError as e:
        try:
            reply.send(("error %s" % e).encode())
        except OSError:
            pass
        reply.close()
    finally:
        if pid != 0:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGCHLD])
            for fd in run_fds:
                os.close(fd)
    return None


def main():
    # No user namespace below this one: a run cannot make one (the strict
    # filter denies it too).
    try:
        with open("/proc/sys/user/max_user_namespaces", "w") as f:
            f.write("0")
    except OSError as e:
        sys.stderr.write("nekro template: max_user_namespaces: %s\n" % e)
        os._exit(1)
    os.close(5)  # this script
    # What every run would do alike is done here once, and inherited: the
    # bounding set emptied (it bounds only what an execve may gain, and
    # the template executes nothing: it keeps its own capabilities), and
    # the runs' environment, the same for every run (CFG["env"]). Each
    # was 70 and 200 microseconds of a run's start.
    for cap in _BOUNDING:
        _chk(_prctl(PR_CAPBSET_DROP, cap), "drop bounding cap %d" % cap)
    os.environ.clear()
    os.environ.update(CFG["env"])
    _prctl(PR_SET_DUMPABLE, 0)
    _WAKE[:] = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(_WAKE[1], warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, _reap)
    own_pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    ctl = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, 0, CTL_FD)
    ctl.sendall(b'{"ready": true}')
    while True:
        try:
            ready, _, _ = select.select([ctl, _KEEP_PARENT, _WAKE[0]], [], [])
        except InterruptedError:
            continue
        if _WAKE[0] in ready:
            try:
                os.read(_WAKE[0], 4096)  # the handler runs as this returns
            except BlockingIOError:
                pass
        if _KEEP_PARENT in ready:
            _kept_received()
        if ctl not in ready:
            continue
        msg, fds, _flags, _addr = socket.recv_fds(ctl, 1 << 16, 64)
        if not msg:
            os._exit(0)  # the host closed the control socket
        box = _serve(ctl, own_pid_ns, msg, fds)
        if box is not None:
            return box  # a run's child: out of these frames


_child(main())
