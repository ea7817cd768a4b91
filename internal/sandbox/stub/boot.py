# nekro run bootstrap, trusted code that runs before the AI's: it lowers the
# resource limits, loads the generated stubs, then runs /app/.nekro/main.py
# as __main__ with the stubs and _ck in its globals. It imports as little
# as it can: every module here is paid by every run.
#
# argv: boot.py MEMORY_BYTES FILE_BYTES PROCESSES RELEASE_FD [READY_FD [CONN_FD [SITE_DIRS]]]
# RELEASE_FD is 3 (bubblewrap passes a pipe) or 0 (Docker: stdin): the host
# writes the byte "1" and then the code, and closes it. When READY_FD is
# given (not -1), boot.py writes one byte to it once it waits for the
# release, so the host knows every process of the run exists. CONN_FD, when
# given (not -1), is the run's RPC control socket (rpc.ListenPassed); without
# it the stubs connect to /app/.nekro/rpc.sock. Every other descriptor is
# closed before the code runs: the code sees only what the host handed it.
# SITE_DIRS, given when the interpreter was started with -S (bubblewrap's
# fresh sandboxes: site is half of an interpreter's start), lists with ":"
# the directories site would have put on sys.path; boot.py adds them and
# site's builtins (exit, quit, help, ...) itself.
import sys


def _set_limits(mem, fsize, nproc):
    """A run's rlimits; the zygote's runs set theirs with this too."""
    import resource

    for res, value in (
        (resource.RLIMIT_AS, mem),
        (resource.RLIMIT_FSIZE, fsize),
        (resource.RLIMIT_NPROC, nproc),
        (resource.RLIMIT_NOFILE, 1024),
        (resource.RLIMIT_CORE, 0),
    ):
        soft, hard = resource.getrlimit(res)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(res, (value, value))


def _limit():
    _set_limits(*(int(a) for a in sys.argv[1:4]))
    del sys.argv[1:]
    # The host may start this file's byte code (boot.pyc): the run sees
    # the source's name either way.
    sys.argv[0] = "/app/.nekro/boot.py"


def _site(dirs):
    """What python -S skipped: site's directories on sys.path, its builtins."""
    for d in dirs.split(":"):
        if d and d not in sys.path:
            sys.path.append(d)
    import builtins
    import _sitebuiltins as sb

    eof = "Ctrl-D (i.e. EOF)"
    builtins.exit = sb.Quitter("exit", eof)
    builtins.quit = sb.Quitter("quit", eof)
    builtins.help = sb._Helper()
    builtins.copyright = sb._Printer("copyright", sys.copyright)
    builtins.credits = sb._Printer(
        "credits",
        "Thanks to CWI, CNRI, BeOpen.com, Zope Corporation and a cast of thousands\n"
        "    for supporting Python development.  See www.python.org for more information.",
    )
    builtins.license = sb._Printer("license", "See https://www.python.org/psf/license/")


def _load_stubs():
    """Loads /app/.nekro/api_caller.py as the module api_caller: from the
    byte code the host compiled (pyc.go) when it is there, without the
    import system. Its finders and loaders are Python functions, and in a
    fork of the template or of a zygote every page they write is copied
    for the run: measured in a template's run, 188 page faults and 1.5-1.9
    ms of CPU through the import system, 125 and 0.3-0.9 ms this way."""
    from _frozen_importlib_external import MAGIC_NUMBER  # loaded at start: no import

    path = "/app/.nekro/api_caller.py"
    code = None
    try:
        with open("/app/.nekro/__pycache__/api_caller.%s.pyc" % sys.implementation.cache_tag, "rb") as f:
            data = f.read()
    except OSError:
        data = b""
    if data[:4] == MAGIC_NUMBER:
        import marshal

        code = marshal.loads(memoryview(data)[16:])
    else:
        with open(path, "rb") as f:
            code = compile(f.read(), path, "exec", dont_inherit=True)
    m = type(sys)("api_caller")
    m.__file__ = path
    sys.modules["api_caller"] = m
    exec(code, m.__dict__)
    return m


def _short_traceback(exc, src, filename):
    """The traceback of the AI's own code only: frames of main.py."""
    import linecache
    import traceback

    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    te = traceback.TracebackException.from_exception(exc)
    frames = [fr for fr in te.stack if fr.filename == filename]
    lines = []
    if frames:
        lines.append("Traceback (most recent call last):\n")
        lines.extend(traceback.StackSummary.from_list(frames).format())
    lines.extend(te.format_exception_only())
    return "".join(lines)


def _run():
    release_fd = int(sys.argv[4])
    ready_fd = int(sys.argv[5]) if len(sys.argv) > 5 else -1
    conn_fd = int(sys.argv[6]) if len(sys.argv) > 6 else -1
    site_dirs = sys.argv[7] if len(sys.argv) > 7 else None
    _limit()
    if site_dirs is not None and sys.flags.no_site:
        _site(site_dirs)
    api_caller = _load_stubs()
    api_caller._prepare_run()
    # Ready: wait until the host releases the run (fd 3). A warm spare waits
    # here until a run claims it; the code is in place once released.
    import os

    if ready_fd >= 0:
        os.write(ready_fd, b"r")
        os.close(ready_fd)
    released = os.read(release_fd, 1)
    if released != b"1":
        os._exit(0)  # the host discarded this sandbox
    chunks = []
    while True:
        b = os.read(release_fd, 1 << 16)
        if not b:
            break
        chunks.append(b)
    src = b"".join(chunks).decode("utf-8", "replace")
    if release_fd == 0:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
    # Only stdin, stdout, stderr and the RPC control socket stay open, the
    # socket as descriptor 3 (as in a zygote's runs), inheritable: the pip
    # of a program the code starts finds it there.
    if conn_fd >= 3:
        os.closerange(3, conn_fd)
        os.closerange(conn_fd + 1, 1 << 20)
        if conn_fd != 3:
            os.dup2(conn_fd, 3)
            os.close(conn_fd)
        api_caller._CONN_FD = 3
    else:
        os.closerange(3, 1 << 20)
    with open("/app/.nekro/chat_key", encoding="utf-8") as f:
        chat_key = f.read()
    filename = "main.py"
    g = {"__name__": "__main__", "__file__": filename, "__builtins__": __builtins__}
    exec("from api_caller import *", g)
    g["_ck"] = chat_key
    try:
        exec(compile(src, filename, "exec"), g)
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - report everything, exit 1
        sys.stdout.flush()
        sys.stderr.write(_short_traceback(e, src, filename))
        sys.stderr.flush()
        sys.exit(1)


_run()
