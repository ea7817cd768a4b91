# nekro's warm per-chat zygote: trusted code, started by bwrap in the chat's
# sandbox (its uid, its /app/shared and /app/uploads, no network) with
# CAP_SYS_ADMIN, CAP_SETPCAP and CAP_NET_ADMIN inside bwrap's user namespace
# only, nested user namespaces disabled, and seccomp.ZygoteFilter.
#
# It imports the run's stubs and the heavy libraries once, then keeps one
# spare forked ahead of need. A spare is two processes:
#   C1 (waiter): unshares mount, IPC, PID and network namespaces, mounts a
#      fresh tmpfs on /tmp and /dev/shm, brings lo up, forks C2, drops every
#      capability, loads the strict seccomp filter, and writes C2's exit
#      status to the status pipe only it holds: as soon as C2 says it is
#      done (the "done" pipe), or when C2 is gone if it never says so.
#   C2 (the run): pid 1 of the new PID namespace with its own /proc; drops
#      every capability, lowers the rlimits, loads the strict filter, resets
#      environment and working directory, then tells the host it is ready
#      and waits on its socket for the code, the output pipe and the RPC
#      connection, all sent by the host directly.
# The zygote tells the host about each spare (its pid, its socket and the
# status pipe's read end, by SCM_RIGHTS on the control socket, fd 3) and
# forks the next one when the host says it took it ("t").
#
# argv: zygote.py CONFIG_JSON; the strict filter is read from fd 4.
import ctypes
import importlib
import json
import os
import signal
import socket
import struct
import sys

CFG = json.loads(sys.argv[1])
CTL_FD, SECCOMP_FD = 3, 4

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWPID = 0x20000, 0x08000000, 0x40000000, 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 0x4000, 1 << 18
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP = 1, 4, 24
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2


def _chk(ret, what):
    if ret != 0:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (what, os.strerror(e)))


def _prctl(op, a=0, b=0, c=0, d=0):
    return libc.prctl(op, a, b, c, d)


def _mount(src, target, fstype, flags, data):
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    _chk(libc.mount(enc(src), enc(target), enc(fstype), flags, enc(data)), "mount " + target)


def _drop_caps():
    _chk(_prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL), "clear ambient caps")
    for cap in range(64):
        if _prctl(PR_CAPBSET_DROP, cap) != 0:
            if ctypes.get_errno() == 22:  # EINVAL: past the last capability
                break
            raise OSError(ctypes.get_errno(), "drop bounding cap %d" % cap)
    hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (ctypes.c_uint32 * 6)()
    _chk(libc.capset(hdr, data), "capset")


_FILTER = os.read(SECCOMP_FD, 1 << 20)
os.close(SECCOMP_FD)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _load_filter():
    _chk(_prctl(PR_SET_NO_NEW_PRIVS, 1), "no_new_privs")
    if not _FILTER:
        return
    buf = ctypes.create_string_buffer(_FILTER, len(_FILTER))
    prog = _SockFprog(len(_FILTER) // 8, ctypes.addressof(buf))
    _chk(_prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog)), "seccomp")


def _lo_up():
    import fcntl

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ifr = struct.pack("16sH14x", b"lo", 0x1 | 0x8 | 0x40)  # IFF_UP|IFF_LOOPBACK|IFF_RUNNING
        fcntl.ioctl(s.fileno(), 0x8914, ifr)  # SIOCSIFFLAGS
    finally:
        s.close()


def _limit():
    import resource

    for res, value in (
        (resource.RLIMIT_AS, CFG["memory"]),
        (resource.RLIMIT_FSIZE, CFG["file"]),
        (resource.RLIMIT_NPROC, CFG["processes"]),
        (resource.RLIMIT_NOFILE, 1024),
        (resource.RLIMIT_CORE, 0),
    ):
        soft, hard = resource.getrlimit(res)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(res, (value, value))


# --- the zygote's own start: stubs and heavy libraries, once ---------------
sys.path.insert(0, "/app/.nekro")
import api_caller  # noqa: E402

sys.path.remove("/app/.nekro")
api_caller._prepare_run()  # nekro's pip, the chat's package layer, before the preloads
for mod in CFG.get("preload", []):
    try:
        __import__(mod)
    except Exception:  # noqa: BLE001 - not installed or broken: runs import it themselves
        pass


def _warm_matplotlib():
    """Draw once, off screen: a run's first chart then finds the backend,
    the fonts and the text layout caches loaded (about half a chart's
    time). Nothing of it stays visible: the figure is closed, rcParams are
    untouched, and this zygote serves one chat only."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        import io

        fig = plt.figure()
        plt.plot([1, 2, 3])
        plt.title("warm-up")
        fig.savefig(io.BytesIO(), format="png")
        plt.close("all")
    except Exception:  # noqa: BLE001 - a run will meet the same error itself
        pass


_warm_matplotlib()
import gc  # noqa: E402
import linecache  # noqa: E402,F401 - used by every traceback
import traceback  # noqa: E402,F401

with open("/app/.nekro/chat_key", encoding="utf-8") as f:
    CHAT_KEY = f.read()
BOOT = {}
with open("/app/.nekro/boot.py", encoding="utf-8") as f:
    # boot.py's helpers (its _short_traceback), without running it.
    src = f.read()
    exec(compile(src.replace("\n_run()\n", "\n"), "/app/.nekro/boot.py", "exec"), BOOT)
ENV = {k: v for k, v in os.environ.items() if k not in CFG.get("zygote_env", [])}
gc.collect()
gc.freeze()
_prctl(PR_SET_DUMPABLE, 0)  # nothing of the run's uid may read or trace the zygote
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # spares report to the host, not to us


def _exit_status(st):
    if os.WIFEXITED(st):
        return os.WEXITSTATUS(st)
    return -os.WTERMSIG(st)


# C2's end of the "done" pipe, on which it tells C1 its exit status before
# it exits. A process as big as a zygote's fork takes 10-25 ms to tear down
# on this kind of VM (its memory, then its PID namespace); the status and
# the end of the output reach the host first, and the host kills the run's
# PID namespace when the status comes, so a run that says "done" early
# ends there. Trusting the run for its exit status gives it nothing: its
# code could os._exit() with any status anyway.
DONE_FD = 4


def _run_c2(sock, status_w, done_w):
    """C2: pid 1 of the run's PID namespace; never returns."""
    try:
        os.close(status_w)
        done = os.dup2(done_w, 1000, inheritable=False)
        os.close(done_w)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
        _drop_caps()
        _limit()
        _load_filter()
        _prctl(PR_SET_DUMPABLE, 1)
        os.chdir("/app")
        os.environ.clear()
        os.environ.update(ENV)
        sys.argv[:] = ["/app/.nekro/boot.py"]
        np = sys.modules.get("numpy")
        if np is not None:
            np.random.seed()
        # The run's namespace, made while the spare waits: the pages this
        # touches are copied now rather than on the run's time (measured:
        # 0.2-0.9 ms of a zygote run's 7-8 ms for `pass`).
        g = {"__name__": "__main__", "__file__": "main.py", "__builtins__": __builtins__}
        exec("from api_caller import *", g)
        g["_ck"] = CHAT_KEY
        compile("pass\n", "main.py", "exec")
        sock.send(b"r")
        msg, fds, _flags, _addr = socket.recv_fds(sock, 1 << 16, 2)
        if len(fds) != 2:
            os._exit(0)  # the host discarded this spare
        chunks = [msg]
        while True:
            b = sock.recv(1 << 16)
            if not b:
                break
            chunks.append(b)
        sock.close()
        out, conn = fds
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.dup2(conn, 3)
        os.dup2(done, DONE_FD, inheritable=False)
        os.closerange(DONE_FD + 1, 1 << 20)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        api_caller._CONN_FD = 3
        # Packages the chat installed since the zygote started (its layer
        # changed under the finders' caches) import like the rest.
        importlib.invalidate_caches()
        src = b"".join(chunks).decode("utf-8", "replace")
    except BaseException:  # noqa: BLE001 - a broken spare must not run anything
        os._exit(125)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    filename = "main.py"
    code = 0
    try:
        exec(compile(src, filename, "exec"), g)
    except SystemExit as e:
        code = _system_exit_code(e)
    except BaseException as e:  # noqa: BLE001 - report everything, exit 1
        sys.stdout.flush()
        sys.stderr.write(BOOT["_short_traceback"](e, src, filename))
        code = 1
    # What the interpreter does at exit: join non-daemon threads, run atexit
    # handlers, flush; then leave without tearing the preloaded modules down.
    try:
        import threading

        threading._shutdown()
    except BaseException:  # noqa: BLE001
        pass
    try:
        import atexit

        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        pass
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except BaseException:  # noqa: BLE001
            pass
    # The output ends here and C1 hears the status now, not after this
    # process's teardown.
    for fd in (1, 2):
        try:
            os.close(fd)
        except OSError:
            pass
    try:
        os.write(DONE_FD, b"%d\n" % (code & 0xFF))
    except OSError:
        pass
    os._exit(code)


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


def _spare(sock, status_w):
    """C1, in the zygote's fork: never returns."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        flags = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWPID
        if not CFG["network"]:
            flags |= CLONE_NEWNET
        _chk(libc.unshare(flags), "unshare")
        _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
        tmp = "mode=1777,size=%d" % CFG["tmp"]
        _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, tmp)
        _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, tmp)
        if not CFG["network"]:
            _lo_up()
        done_r, done_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(done_r)
            _run_c2(sock, status_w, done_w)
        sock.close()
        os.close(done_w)
        _drop_caps()
        _load_filter()
        said = b""
        while not said.endswith(b"\n") and len(said) < 8:
            b = os.read(done_r, 8)
            if not b:
                break
            said += b
        if said.endswith(b"\n") and said[:-1].isdigit():
            os.write(status_w, said)  # the host kills what is left of the run
            os.waitpid(pid, 0)
        else:  # C2 died, or its code closed the pipe or wrote nonsense
            _, st = os.waitpid(pid, 0)
            os.write(status_w, b"%d\n" % _exit_status(st))
    except BaseException:  # noqa: BLE001
        os._exit(1)
    os._exit(0)


def main():
    ctl = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, 0, CTL_FD)
    ctl.sendall(json.dumps({"ready": True}).encode())
    while True:
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        status_r, status_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                ctl.close()
                a.close()
                os.close(status_r)
                os.setsid()
                keep = {b.fileno(), status_w}
                for fd in range(3, max(keep) + 1):
                    if fd not in keep:
                        try:
                            os.close(fd)
                        except OSError:
                            pass
                os.closerange(max(keep) + 1, 1 << 20)
            except BaseException:  # noqa: BLE001
                os._exit(1)
            _spare(b, status_w)
        b.close()
        os.close(status_w)
        socket.send_fds(ctl, [json.dumps({"spare": pid}).encode()], [a.fileno(), status_r])
        a.close()
        os.close(status_r)
        # Wait until the host takes this spare ("t"), or leaves ("" = EOF).
        while True:
            m = ctl.recv(64)
            if not m:
                os._exit(0)
            if m == b"t":
                break


main()
