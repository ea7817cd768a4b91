"""nekro's pip: the sandbox has no network, so `pip install` asks the host.

The host installs binary wheels from the operator's package index into this
chat's own package layer, /app/shared/.packages, which every run of the
chat imports from (after the sandbox's own packages). `pip install`,
`python -m pip install`, `pip3`, a subprocess running them and
`pip.main([...])` all end up here. uninstall asks the host too (runs see
the layer read-only: only the host's installer writes it); list and freeze
read the layer locally.
"""
import os
import sys

LAYER = "/app/shared/.packages"
_METHOD = "_nekro_pip"

# Options of the real pip that change nothing here.
_IGNORED = {
    "-q", "--quiet", "-v", "--verbose", "--user", "--no-cache-dir", "--break-system-packages",
    "--no-warn-script-location", "--disable-pip-version-check", "--no-input", "--prefer-binary",
    "--no-color", "--progress-bar=off", "--root-user-action=ignore", "-y", "--yes", "--no-compile",
}
_REFUSED = (
    "-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--no-index", "-t", "--target",
    "--prefix", "--root", "-e", "--editable", "--pre", "--no-binary", "--trusted-host",
)


def _api():
    """api_caller, connected the way this process can reach the host."""
    mod = sys.modules.get("api_caller")
    if mod is not None:
        return mod  # the run's own process: boot.py or the zygote set it up
    sys.path.insert(0, "/app/.nekro")
    try:
        import api_caller as mod
    finally:
        sys.path.remove("/app/.nekro")
    # A program the run started: its control socket is descriptor 3 when
    # the backend hands one over; otherwise the socket's path.
    import socket

    try:
        s = socket.socket(fileno=3)
        ok = s.family == socket.AF_UNIX and s.type == socket.SOCK_SEQPACKET
        s.detach()
    except OSError:
        ok = False
    mod._CONN_FD = 3 if ok else -1
    return mod


def _err(msg):
    sys.stdout.flush()
    sys.stderr.write("ERROR: %s\n" % msg)
    sys.stderr.flush()
    return 1


def _requirements_file(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                out.append(line)
    return out


def _install(args):
    reqs, upgrade = [], False
    it = iter(args)
    for a in it:
        if a in ("-U", "--upgrade"):
            upgrade = True
        elif a in ("-r", "--requirement"):
            reqs += _requirements_file(next(it, ""))
        elif a.startswith("--requirement="):
            reqs += _requirements_file(a.split("=", 1)[1])
        elif a in _IGNORED or a.startswith(("--only-binary", "--progress-bar", "--root-user-action")):
            if a in ("--only-binary", "--progress-bar", "--root-user-action"):
                next(it, None)
        elif a.split("=", 1)[0] in _REFUSED:
            return _err("%s: packages come from the operator's index and go into this chat's %s; "
                        "nekro's pip takes package names only (pip install NAME[==VERSION] ...)" % (a, LAYER))
        elif a.startswith("-"):
            return _err("pip install %s: option not supported here (pip install [-U] [-r FILE] NAME ...)" % a)
        else:
            reqs.append(a)
    if not reqs:
        return _err("You must give at least one requirement to install (pip install NAME)")
    return _ask({"requirements": reqs, "upgrade": upgrade})


def _ask(args):
    """Has the host's installer, the one writer of the layer (runs see it
    read-only), carry out an install or uninstall; returns pip's status."""
    api = _api()
    try:
        res = api._conn.call(_METHOD, "tool", args)
    except api.NekroError as e:
        return _err(str(e))
    out = res.get("output") or ""
    if out:
        sys.stdout.write(out if out.endswith("\n") else out + "\n")
        sys.stdout.flush()
    if res.get("exit", 0) == 0:
        import importlib

        importlib.invalidate_caches()
    return res.get("exit", 0)


def _dists():
    import importlib.metadata as md

    return sorted(md.distributions(path=[LAYER]), key=lambda d: (d.metadata["Name"] or "").lower())


def _list(freeze):
    dists = _dists()
    if freeze:
        for d in dists:
            print("%s==%s" % (d.metadata["Name"], d.version))
        return 0
    print("Package (in %s)  Version" % LAYER)
    for d in dists:
        print("%s  %s" % (d.metadata["Name"], d.version))
    return 0


def _uninstall(args):
    names = [a for a in args if not a.startswith("-")]
    if not names:
        return _err("You must give at least one requirement to uninstall (pip uninstall NAME)")
    return _ask({"requirements": names, "uninstall": True})


def main(args=None):
    """Runs a pip command line; returns its exit status."""
    args = list(sys.argv[1:] if args is None else args)
    while args and args[0] in _IGNORED:
        args.pop(0)
    if not args or args[0] in ("-h", "--help", "help"):
        print(__doc__.strip())
        return 0
    if args[0] in ("-V", "--version"):
        print("pip (nekro): installs into %s from the operator's package index" % LAYER)
        return 0
    cmd, rest = args[0], args[1:]
    if cmd == "install":
        try:
            return _install(rest)
        except OSError as e:  # a requirements file that cannot be read
            return _err(str(e))
    if cmd in ("list", "freeze"):
        return _list(cmd == "freeze")
    if cmd == "uninstall":
        return _uninstall(rest)
    return _err("pip %s is not available in the sandbox: pip install, uninstall, list and freeze are" % cmd)
