# nekro's package installer: trusted code the host runs with the sandbox's
# python (-I) in a sandbox of its own, as the chat's uid, to carry out a
# run's `pip install` (or `pip uninstall`). It is the one writer of the
# chat's package layer, which runs see read-only. It sees the layer
# (read-write) but nothing else of the chat's /app/shared, the system
# read-only, the operator's wheel directory read-only (or, for an index
# URL, the network) and a private /tmp. Nothing here imports from the
# chat's layer: pip runs isolated (-I, --isolated) with the system's
# sys.path.
#
# argv: LAYER INDEX MODE(install|upgrade|uninstall) MEMORY FILE PROCESSES REQUIREMENT...
# Binary wheels only (--only-binary=:all:): no setup.py or build backend of
# anyone's runs. pip resolves dependencies against the system's packages
# (already satisfied ones are not fetched) into a staging prefix in /tmp;
# the result is then moved into the layer, replacing older versions there.
import errno
import os
import resource
import shutil
import subprocess
import sys

LAYER, INDEX, MODE = sys.argv[1], sys.argv[2], sys.argv[3]
UPGRADE = MODE == "upgrade"
MEMORY, FSIZE, NPROC = (int(a) for a in sys.argv[4:7])
REQS = sys.argv[7:]
EXIT_FULL = 28  # the host names --shared-quota


def limit():
    for res, value in (
        (resource.RLIMIT_AS, MEMORY),
        (resource.RLIMIT_FSIZE, FSIZE),
        (resource.RLIMIT_NPROC, NPROC),
        (resource.RLIMIT_NOFILE, 1024),
        (resource.RLIMIT_CORE, 0),
    ):
        soft, hard = resource.getrlimit(res)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(res, (value, value))


def norm(name):
    return name.lower().replace("_", "-").replace(".", "-")


def layer_dists():
    """The layer's distributions, by normalized name: (version, dist-info dir)."""
    import importlib.metadata as md

    out = {}
    for d in md.distributions(path=[LAYER]):
        try:
            name = d.metadata["Name"]
        except Exception:  # noqa: BLE001 - a broken dist-info is ignored
            continue
        if name:
            out[norm(name)] = (d.version, getattr(d, "_path", None))
    return out


def satisfied(req, have):
    """Whether the layer already has what req asks for."""
    try:
        from pip._vendor.packaging.requirements import Requirement

        r = Requirement(req)
    except Exception:  # noqa: BLE001 - unparsable here: let pip decide
        return None
    got = have.get(norm(r.name))
    if got is None:
        return None
    if r.specifier and not r.specifier.contains(got[0], prereleases=True):
        return None
    return "%s %s" % (r.name, got[0])


def staged_dirs(prefix):
    for root, dirs, _files in os.walk(prefix):
        for d in list(dirs):
            if d in ("site-packages", "dist-packages"):
                yield os.path.join(root, d)
                dirs.remove(d)


def remove(path):
    if os.path.islink(path) or not os.path.isdir(path):
        os.unlink(path)
    else:
        shutil.rmtree(path)


def move_in(staged):
    """Moves staged packages into the layer, replacing what they supersede."""
    have = layer_dists()
    entries = sorted(os.listdir(staged))
    for e in entries:  # older versions of the projects installed now go
        if e.endswith(".dist-info"):
            name = norm(e[: -len(".dist-info")].rsplit("-", 1)[0])
            old = have.get(name)
            if old and old[1] is not None and os.path.basename(str(old[1])) != e:
                remove(str(old[1]))
    for e in entries:
        src, dst = os.path.join(staged, e), os.path.join(LAYER, e)
        if os.path.lexists(dst):
            remove(dst)
        try:
            if os.path.isdir(src):
                shutil.copytree(src, dst, symlinks=True)
            else:
                shutil.copy2(src, dst)
        except OSError:
            if os.path.lexists(dst):
                try:
                    remove(dst)
                except OSError:
                    pass
            raise


def uninstall(names):
    """Removes the named distributions' files (those their RECORD lists,
    inside the layer) and their metadata from the layer."""
    import importlib.metadata as md

    by_name = {}
    for d in md.distributions(path=[LAYER]):
        try:
            by_name[norm(d.metadata["Name"] or "")] = d
        except Exception:  # noqa: BLE001 - a broken dist-info is ignored
            continue
    root = os.path.realpath(LAYER)
    for n in names:
        d = by_name.get(norm(n))
        if d is None:
            print("WARNING: Skipping %s as it is not installed in %s." % (n, LAYER))
            continue
        label = "%s-%s" % (d.metadata["Name"], d.version)  # before its metadata goes
        dirs = set()
        for f in d.files or []:
            p = os.path.realpath(os.path.join(LAYER, str(f)))
            if p.startswith(root + os.sep) and os.path.isfile(p):
                os.unlink(p)
                dirs.add(os.path.dirname(p))
        for p in sorted(dirs, key=len, reverse=True):
            while p.startswith(root + os.sep):
                try:
                    os.rmdir(p)
                except OSError:
                    break
                p = os.path.dirname(p)
        info = getattr(d, "_path", None)
        if info is not None and os.path.isdir(str(info)):
            shutil.rmtree(str(info), ignore_errors=True)
        print("Successfully uninstalled %s" % label)
    return 0


def main():
    limit()
    if MODE == "uninstall":
        import re

        return uninstall([re.match(r"[A-Za-z0-9._-]+", r).group(0) for r in REQS])
    import importlib.util

    if importlib.util.find_spec("pip") is None:
        print("nekro: the sandbox's python has no pip: the operator installs it on the host (apt-get install python3-pip)")
        return 1
    if os.path.lexists(LAYER) and (os.path.islink(LAYER) or not os.path.isdir(LAYER)):
        print("nekro: %s is not a directory: remove it and install again" % LAYER)
        return 1
    os.makedirs(LAYER, exist_ok=True)
    reqs = []
    if not UPGRADE:
        have = layer_dists()
        for r in REQS:
            got = satisfied(r, have)
            if got:
                print("Requirement already satisfied: %s in %s" % (got, LAYER))
            else:
                reqs.append(r)
    else:
        reqs = list(REQS)
    if not reqs:
        return 0
    stage = "/tmp/nekro-pip"
    args = [sys.executable, "-I", "-m", "pip", "install", "--isolated", "--disable-pip-version-check",
            "--no-input", "--no-cache-dir", "--only-binary=:all:", "--progress-bar", "off",
            "--no-warn-script-location", "--root-user-action=ignore", "--prefix", stage]
    if UPGRADE:
        args.append("--upgrade")
    if INDEX.startswith(("http://", "https://")):
        args += ["--index-url", INDEX]
    else:
        args += ["--no-index", "--find-links", INDEX]
    sys.stdout.flush()
    done = subprocess.run(args + ["--"] + reqs, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace")
    out = done.stdout.replace(stage, LAYER)
    if done.returncode != 0:
        sys.stdout.write(out)
        return done.returncode
    try:
        for staged in staged_dirs(stage):
            move_in(staged)
    except OSError as e:  # shutil.Error too: it lists each file's error
        if e.errno in (errno.ENOSPC, errno.EDQUOT) or "[Errno %d]" % errno.ENOSPC in str(e) or "[Errno %d]" % errno.EDQUOT in str(e):
            # pip's "Successfully installed" was about the staging area.
            sys.stdout.write("".join(l for l in out.splitlines(True) if not l.startswith("Successfully installed")))
            print("nekro: the packages did not fit in %s: the chat's disk is full" % LAYER)
            return EXIT_FULL
        raise
    sys.stdout.write(out)
    return 0


sys.exit(main())
