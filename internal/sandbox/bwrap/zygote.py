# nekro's warm per-chat zygote: trusted code, started by bwrap in the chat's
# sandbox (its uid, its /app/shared and /app/uploads, no network) with
# CAP_SYS_ADMIN, CAP_SETPCAP and CAP_NET_ADMIN inside bwrap's user namespace
# only, nested user namespaces disabled, and seccomp.ZygoteFilter.
#
# It imports the run's stubs and the heavy libraries once, then forks a
# spare each time the host asks for one. A spare is one process, forked into a new PID
# namespace (the zygote unshares CLONE_NEWPID for its children, forks, and
# goes back to its own with setns) as its pid 1: it unshares mount, IPC and
# network namespaces, mounts a fresh tmpfs on /tmp and /dev/shm and its own
# /proc, brings lo up, drops every capability, lowers the rlimits, loads
# the strict filter, sets its working directory and rehearses a run's
# hand-over and exit (_rehearse_exit), then tells the host it is ready and
# waits on its socket for the code, the output pipe and the RPC
# connection, all sent by the host directly (in a chat that draws, it
# rehearses a chart meanwhile: _rehearse_chart).
#
# The zygote tells the host about each spare (its pid, its socket and the
# status pipe's read end, by SCM_RIGHTS on the control socket, fd 3) and
# forks one each time the host asks ("f"): the host's warm spare, started
# after a run or while the model writes, is the one ahead of need, so the
# zygote keeps none of its own (a second spare per chat, forked after
# each run and left unused at a conversation's end). It reaps its
# spares and writes the exit status of one that died before it said it was
# done (see DONE_FD). One fork per spare: a fork of a zygote this size
# costs 10-40 ms on a VM with slow page-table updates, and a spare used to
# be two (a waiter and the run).
#
# argv: zygote.py CONFIG_JSON; the strict filter is read from fd 4.
import ctypes
import fcntl
import json
import mmap
import os
import resource  # noqa: F401 - loaded here, not in each spare: boot.py's _set_limits imports it
import select
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


PR_CAPBSET_READ = 23


def _bounding_set():
    caps = []
    for cap in range(64):
        r = _prctl(PR_CAPBSET_READ, cap)
        if r < 0:  # EINVAL: past the last capability
            break
        if r == 1:
            caps.append(cap)
    return caps


# Everything a spare's _drop_caps needs, made once here: each object a
# spare creates or first touches costs it copy-on-write faults. The
# bounding set is the zygote's (bwrap left it CAP_SYS_ADMIN, CAP_SETPCAP
# and CAP_NET_ADMIN); dropping a capability that is not in it changes
# nothing, so a spare drops those present only.
_BOUNDING = _bounding_set()
_CAP_HDR = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
_CAP_NONE = (ctypes.c_uint32 * 6)()


def _drop_caps():
    _chk(_prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL), "clear ambient caps")
    for cap in _BOUNDING:
        _chk(_prctl(PR_CAPBSET_DROP, cap), "drop bounding cap %d" % cap)
    _chk(libc.capset(_CAP_HDR, _CAP_NONE), "capset")


_FILTER = os.read(SECCOMP_FD, 1 << 20)
os.close(SECCOMP_FD)



def _reserve_low_fds():
    """Holds the lowest free descriptors (at least up to 19) while
    libraries open files they keep (matplotlib keeps its font file open,
    and FreeType reads glyphs through it on demand): those get numbers
    above every descriptor a spare or a run sets for itself (3-4, and the
    two it receives), and stay open in them (_LIB_FDS). A font a rehearsal
    left on descriptor 4 was the run's status pipe there, and text in the
    run's chart failed to render ("Illegal seek")."""
    return [os.open(os.devnull, os.O_RDONLY) for _ in range(16)]


_RESERVED = _reserve_low_fds()


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_FILTER_BUF = ctypes.create_string_buffer(_FILTER, len(_FILTER))
_FILTER_PROG = _SockFprog(len(_FILTER) // 8, ctypes.addressof(_FILTER_BUF))


def _load_filter():
    _chk(_prctl(PR_SET_NO_NEW_PRIVS, 1), "no_new_privs")
    if _FILTER:
        _chk(_prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(_FILTER_PROG)), "seccomp")


def _lo_up():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ifr = struct.pack("16sH14x", b"lo", 0x1 | 0x8 | 0x40)  # IFF_UP|IFF_LOOPBACK|IFF_RUNNING
        fcntl.ioctl(s.fileno(), 0x8914, ifr)  # SIOCSIFFLAGS
    finally:
        s.close()


def _exit_status(st):
    if os.WIFEXITED(st):
        return os.WEXITSTATUS(st)
    return -os.WTERMSIG(st)


def _own_pid_namespace():
    """Goes on as pid 1 of a PID namespace of the zygote's own.

    A spare is forked into a new PID namespace, and the zygote then sets
    the namespace of its next children back to its own (setns), which the
    kernel allows only in a namespace whose owner is the zygote's user
    namespace; bwrap's PID namespace belongs to its outer one. This process
    (bwrap's pid 1) waits for the zygote and ends with it; the zygote's
    spares die with either."""
    _chk(libc.unshare(CLONE_NEWPID), "unshare")
    pid = os.fork()
    if pid == 0:
        return
    os.closerange(3, 1 << 20)
    _, st = os.waitpid(pid, 0)
    os._exit(_exit_status(st) & 0xFF)


_own_pid_namespace()

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


def _font_cache():
    """matplotlib's font cache as the host gave it (read-only, in this
    sandbox's /tmp/.matplotlib), for the spares of a zygote that did not
    import matplotlib: a spare's /tmp is a new tmpfs, and a run importing
    matplotlib there would build the cache again (fc-list, every font)."""
    if "matplotlib" in sys.modules:
        return None
    d = "/tmp/.matplotlib"
    try:
        for name in os.listdir(d):
            if name.startswith("fontlist-") and name.endswith(".json"):
                with open(os.path.join(d, name), "rb") as f:
                    return d, name, f.read()
    except OSError:
        pass
    return None


_FONTS = _font_cache()


def _give_font_cache():
    """Copies the font cache into the spare's own /tmp (a page per 4 KiB
    of it, written once while the spare waits)."""
    d, name, data = _FONTS
    os.mkdir(d, 0o755)
    fd = os.open(d + "/" + name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)

# Charts ahead of need. A run's first chart writes to about 3,100 pages it
# shares with the zygote (copy-on-write faults: 50-80 ms on a VM with slow
# page faults, as much as the chart itself); a spare that has drawn once
# has them copied already. That costs a spare ~130 ms of CPU and ~12 MB of
# memory, so only spares of a chat whose recent code used matplotlib draw,
# and only once they have waited _IDLE_BEFORE_CHART for code: runs that
# come back to back (an AI's code in a loop) never wait for a chart being
# rehearsed, and runs a model's reply apart (seconds) find it done.
# _CHARTS[0] is shared by the zygote and all its spares (an anonymous
# shared mapping): how many of the chat's next runs still count as
# drawing. A run's code could write it too, and would only make its own
# chat's spares draw.
_CHARTS = mmap.mmap(-1, mmap.PAGESIZE)
_CHART_MEMORY = 8  # runs
_IDLE_BEFORE_CHART = 0.25  # seconds
if "matplotlib.pyplot" in CFG.get("preload", []):
    # The host preloads pyplot only for a chat whose code used it: its
    # next runs count as drawing, as they did in the zygote this one
    # replaced.
    _CHARTS[0] = _CHART_MEMORY


def _note_charts(src):
    if "matplotlib" in src or "pyplot" in src:
        _CHARTS[0] = _CHART_MEMORY
    elif _CHARTS[0]:
        _CHARTS[0] -= 1


def _rehearse_chart(sock):
    """Draws a throwaway chart if the chat draws and no code came within
    _IDLE_BEFORE_CHART (code that comes meanwhile waits for it). The chat's
    run going on while this spare waits may be the one that draws: the
    spare looks again a while later."""
    global _LIB_FDS
    if "matplotlib.pyplot" not in sys.modules:
        return
    for idle in (_IDLE_BEFORE_CHART, 2.0):
        ready, _, _ = select.select([sock], [], [], idle)
        if ready:
            return
        if _CHARTS[0]:
            reserved = _reserve_low_fds()
            try:
                _warm_matplotlib()
                _LIB_FDS = _LIB_FDS | _library_fds(reserved)
            finally:
                for fd in reserved:
                    os.close(fd)
            return


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
# What the runs see, set here once rather than by each spare (clearing and
# refilling os.environ cost a spare 4-8 ms of copy-on-write faults).
for _k in CFG.get("zygote_env", []):
    os.environ.pop(_k, None)
sys.argv[:] = ["/app/.nekro/boot.py"]


def _reseed():
    """Gives the next spare a numpy global random state of its own: the
    zygote reseeds it from the OS after each fork, while it waits (in the
    spare, np.random.seed() took 10-20 ms of faults)."""
    np = sys.modules.get("numpy")
    if np is not None:
        try:
            np.random.seed()
        except Exception:  # noqa: BLE001 - a broken numpy: the runs' own problem
            pass


# _exit_work: what a run's exit has to do beyond what the zygote left.
# The preloads registered atexit handlers (logging.shutdown, Pillow's and
# pyplot's cache and figure cleanup) that free memory or flush handlers the
# zygote made; a run's process ends with os._exit, so they are dropped here
# and a run's exit runs only the handlers its own code registered, plus
# logging.shutdown when it added handlers to the zygote's logging (a
# logging first imported by the run registers its own). threading._shutdown
# joins the run's non-daemon threads; it runs when the run started one or
# registered a threading exit hook (concurrent.futures does), or when this
# Python's threading has none of the attributes checked (3.13 and later).
import atexit  # noqa: E402
import threading  # noqa: E402
from time import sleep as _sleep  # noqa: E402

atexit._clear()
_THREAD_HOOKS = len(getattr(threading, "_threading_atexits", ()))
_LOGGING = sys.modules.get("logging")
_ZYGOTE_HANDLERS = len(getattr(_LOGGING, "_handlerList", ()))


def _threads_started():
    locks = getattr(threading, "_shutdown_locks", None)
    hooks = getattr(threading, "_threading_atexits", None)
    main = getattr(threading.main_thread(), "_tstate_lock", None)
    if locks is None or hooks is None or main is None:
        return True
    return len(hooks) != _THREAD_HOOKS or any(lock is not main for lock in locks)


def _handlers_added():
    return _LOGGING is not None and len(getattr(_LOGGING, "_handlerList", ())) != _ZYGOTE_HANDLERS
gc.collect()
gc.freeze()
_prctl(PR_SET_DUMPABLE, 0)  # nothing of the run's uid may read or trace the zygote


def _library_fds(reserved):
    """The descriptors the libraries opened and keep: regular files open
    for reading only (anything else is closed in spares, as before)."""
    import stat

    fds = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd <= 4 or fd in reserved:  # 0-4: stdio, the control socket, DONE_FD
            continue
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode) and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
                fds.append(fd)
        except OSError:
            pass  # the listing's own descriptor, gone by now
    return frozenset(fds)


_LIB_FDS = _library_fds(_RESERVED)
for _fd in _RESERVED:
    os.close(_fd)
del _RESERVED


def _close_fds(keep, start=3):
    """Closes every descriptor from start on but those in keep and the
    libraries' (_LIB_FDS)."""
    keep = sorted(set(keep) | _LIB_FDS)
    low = start
    for fd in keep:
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, 1 << 20)


# The run's copy of the status pipe, on which it tells the host its exit
# status before it exits. A process as big as a zygote's fork takes 10-25
# ms to tear down on this kind of VM (its memory, then its PID namespace);
# the status and the end of the output reach the host first, and the host
# kills the run's PID namespace when the status comes, so a run that says
# "done" early ends there. Trusting the run for its exit status gives it
# nothing: its code could os._exit() with any status anyway, and what it
# writes on this pipe decides only its own run's status (a line that is
# not a number is a failed run). The host reads the first line: the
# run's, or the zygote's (_reap) when the run died without one.
DONE_FD = 4


def _spare(sock, status_w):
    """The spare: pid 1 of its own PID namespace, in the zygote's fork;
    it becomes the run and never returns."""
    try:
        done = os.dup2(status_w, 1000, inheritable=False)
        os.close(status_w)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        flags = CLONE_NEWNS | CLONE_NEWIPC
        if not CFG["network"]:
            flags |= CLONE_NEWNET
        _chk(libc.unshare(flags), "unshare")
        _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
        tmp = "mode=1777,size=%d" % CFG["tmp"]
        _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, tmp)
        _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, tmp)
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
        if _FONTS:
            _give_font_cache()
        if not CFG["network"]:
            _lo_up()
        _drop_caps()
        BOOT["_set_limits"](CFG["memory"], CFG["file"], CFG["processes"])  # a fresh run's limits
        _load_filter()
        _prctl(PR_SET_DUMPABLE, 1)
        os.chdir("/app")
        # The run's namespace, made while the spare waits: the pages this
        # touches are copied now rather than on the run's time (measured:
        # 0.2-0.9 ms of a zygote run's 7-8 ms for `pass`).
        g = {"__name__": "__main__", "__file__": "main.py", "__builtins__": __builtins__}
        exec("from api_caller import *", g)
        g["_ck"] = CHAT_KEY
        exec(compile("pass\n", "main.py", "exec"), g)
        _rehearse_exit()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sock.send(b"r")
        _rehearse_chart(sock)
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
        _close_fds((), start=DONE_FD + 1)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        api_caller._CONN_FD = 3
        # Packages the chat installed since the zygote started import like
        # the rest: its layer's finder drops its listing. Only that one:
        # importlib.invalidate_caches() would touch every finder, and each
        # page a run touches is a copy-on-write fault (15-20 us here;
        # measured 2.8 ms for all 47 finders, against a millisecond for
        # the whole run). Finders of the sandbox's own directories have
        # nothing to drop: nothing writes there.
        layer = sys.path_importer_cache.get(api_caller._PACKAGES)
        if layer is not None:
            layer.invalidate_caches()
        src = b"".join(chunks).decode("utf-8", "replace")
        _note_charts(src)
    except BaseException:  # noqa: BLE001 - a broken spare must not run anything
        os._exit(125)
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
    # Each step is skipped when the run gave it nothing to do (see
    # _exit_work): what it would touch costs copy-on-write faults.
    if _threads_started():
        try:
            threading._shutdown()
        except BaseException:  # noqa: BLE001
            pass
    if atexit._ncallbacks():
        try:
            atexit._run_exitfuncs()
        except BaseException:  # noqa: BLE001
            pass
    if _handlers_added():
        try:
            _LOGGING.shutdown()
        except BaseException:  # noqa: BLE001
            pass
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except BaseException:  # noqa: BLE001
            pass
    # The output ends here and the host hears the status now, not after
    # this process's teardown. The host kills the run a moment later
    # (zygote.go's reapDelay), once it has handed the result on: the
    # teardown of this process, 10-25 ms of CPU on this kind of VM, then
    # does not compete with that. The wait is bounded in case no kill
    # comes.
    for fd in (1, 2):
        try:
            os.close(fd)
        except OSError:
            pass
    try:
        os.write(DONE_FD, b"%d\n" % (code & 0xFF))
    except OSError:
        pass
    try:
        _sleep(5)
    except BaseException:  # noqa: BLE001
        pass
    os._exit(code)


def _rehearse_exit():
    """Touches, while the spare waits, what a run's hand-over and exit
    touch (the objects and functions whose reference counts they change):
    those pages are then copied now, not on the run's time. Nothing here
    changes any state."""
    b"".join([b"pass\n"]).decode("utf-8", "replace")
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        socket.send_fds(a, [b"pass\n"], [a.fileno(), b.fileno()])
        _msg, fds, _flags, _addr = socket.recv_fds(b, 1 << 16, 2)
        for fd in fds:
            os.close(fd)
        a.shutdown(socket.SHUT_WR)
        b.recv(1 << 16)
    finally:
        a.close()
        b.close()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 1001, inheritable=False)
    os.closerange(1001, 1002)
    os.close(null)
    layer = sys.path_importer_cache.get(api_caller._PACKAGES)
    if layer is not None:
        layer.invalidate_caches()
    _threads_started()
    atexit._ncallbacks()
    _handlers_added()
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except BaseException:  # noqa: BLE001
            pass


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


# The status pipes of the zygote's live spares and runs, by pid: _reap
# writes the exit status of one that died without saying it was done.
_STATUS = {}


def _reap(_signum, _frame):
    while True:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        w = _STATUS.pop(pid, None)
        if w is None:
            continue
        try:
            # After the run's own line, if it wrote one: the host reads
            # the first line only, or has closed its end (EPIPE).
            os.write(w, b"%d\n" % _exit_status(st))
        except OSError:
            pass
        os.close(w)


# The signal wake-up pipe (main), as the template's: a SIGCHLD that lands
# after the loop last looked and before it sleeps would otherwise leave a
# spare's status unwritten until the host's next request.
_WAKE = []


def _fork_spare(ctl, own_pid_ns):
    """Forks a spare as pid 1 of a new PID namespace and returns its pid,
    its socket's host end and the status pipe's read end."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    status_r, status_w = os.pipe()
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
    try:
        _chk(libc.unshare(CLONE_NEWPID), "unshare")  # for the next child only
        pid = os.fork()
        if pid == 0:
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGCHLD])
                for fd in _WAKE:
                    os.close(fd)
                ctl.close()
                a.close()
                os.close(status_r)
                os.setsid()
                _close_fds({b.fileno(), status_w})
            except BaseException:  # noqa: BLE001
                os._exit(1)
            _spare(b, status_w)
        # Children forked from here on are in the zygote's own namespace
        # again, until the next unshare.
        _chk(libc.setns(own_pid_ns, CLONE_NEWPID), "setns")
        _STATUS[pid] = status_w
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGCHLD])
    b.close()
    return pid, a, status_r


def main():
    _WAKE[:] = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(_WAKE[1], warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, _reap)
    own_pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    ctl = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, 0, CTL_FD)
    ctl.sendall(json.dumps({"ready": True}).encode())
    while True:
        # Wait until the host asks for a spare ("f"), or leaves ("" = EOF);
        # a signal wakes the loop too, and its handler runs.
        try:
            ready, _, _ = select.select([ctl, _WAKE[0]], [], [])
        except InterruptedError:
            continue
        if _WAKE[0] in ready:
            try:
                os.read(_WAKE[0], 4096)
            except BlockingIOError:
                pass
        if ctl not in ready:
            continue
        m = ctl.recv(64)
        if not m:
            os._exit(0)
        if m != b"f":
            continue
        pid, a, status_r = _fork_spare(ctl, own_pid_ns)
        socket.send_fds(ctl, [json.dumps({"spare": pid}).encode()], [a.fileno(), status_r])
        a.close()
        os.close(status_r)
        _reseed()  # for the next spare (numpy seeded itself for the first)


main()
