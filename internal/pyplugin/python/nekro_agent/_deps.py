"""A plugin's own Python environment: python3 -m nekro_agent._deps PATH ENV_DIR INDEX.

nekro runs this before it starts a plugin whose declared requirements
changed since they were last installed (or were never installed). The
requirements are read from

  - requirements.txt in the plugin's package directory, or NAME.requirements.txt
    beside a single-file plugin NAME.py;
  - pyproject.toml's [project] dependencies in the package directory;

and installed into ENV_DIR, a virtual environment of the plugin's own that
sees the system's packages (--system-site-packages) but comes before them
on the plugin's sys.path: a requirement the system satisfies is not
installed again, one it does not (missing, or another version) is
installed for this plugin only. INDEX is an index URL, a directory of
wheels (pip --no-index --find-links) or empty (only what the system has).

It prints one JSON line: {"installed": {name: version}, "requirements": [...]}
or {"error": text, "package": requirement}. The environment is made anew
each time, so a requirement dropped from the files leaves it too.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

# What nekro writes into ENV_DIR once the requirements are installed; its
# absence means "never installed" (or an installation that failed).
RECORD = "nekro-env.json"


def requirement_files(path: str) -> list:
    """The files a plugin declares its requirements in, those that exist."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        cands = [os.path.join(path, "requirements.txt"), os.path.join(path, "pyproject.toml")]
    else:
        base = os.path.splitext(path)[0]
        cands = [base + ".requirements.txt"]
    return [c for c in cands if os.path.isfile(c)]


class RequirementError(Exception):
    """A requirement that cannot be read or installed; .package names it."""

    def __init__(self, message: str, package: str = ""):
        super().__init__(message)
        self.package = package


def _requirement(text: str, where: str):
    from pip._vendor.packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(text)
    except InvalidRequirement as e:
        raise RequirementError("%s: %r is not a requirement (%s)" % (where, text, e), text) from None


def read_requirements(path: str) -> list:
    """Every requirement the plugin declares, as written (checked)."""
    out = []
    for f in requirement_files(path):
        if f.endswith(".toml"):
            import tomllib

            try:
                with open(f, "rb") as fh:
                    data = tomllib.load(fh)
            except (OSError, ValueError) as e:
                raise RequirementError("%s: %s" % (f, e)) from None
            deps = (data.get("project") or {}).get("dependencies") or []
            if not isinstance(deps, list):
                raise RequirementError("%s: [project] dependencies is not a list" % f)
            for d in deps:
                if not _provided(_requirement(str(d), f)):
                    out.append(str(d).strip())
            continue
        with open(f, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                line = line.split(" #", 1)[0].strip()
                if not line or line.startswith("#"):
                    continue
                if line.startswith("-"):
                    # Options (-r, -e, --index-url...) could reach past the
                    # operator's index or outside the plugin: refused.
                    raise RequirementError("%s:%d: pip options are not accepted in a plugin's requirements "
                                           "(packages come from nekro's --python-index): %s" % (f, n, line), line)
                if not _provided(_requirement(line, "%s:%d" % (f, n))):
                    out.append(line)
    return out


# Distributions nekro provides itself: the plugin's own framework, which
# plugins list as a dependency (nekro-agent>=2.0.0) and nekro embeds
# (this package); installing it from an index would shadow it.
PROVIDED = {"nekro-agent"}


# Packages the reference's nekro-agent itself depends on (its
# pyproject.toml), by the name they are imported as: its plugins import
# them without declaring them (festival_greeting's lunar_python,
# cc_workspace's aiodocker). nekro embeds none of them; a plugin whose import
# stops on one gets it installed into its own environment from
# --python-index, at the version the reference asks at least.
REFERENCE_PACKAGES = {
    "aiodocker": "aiodocker>=0.22.2", "aiofiles": "aiofiles>=24.1.0", "aiohttp": "aiohttp>=3.11.15",
    "aiosmtplib": "aiosmtplib>=2.0.0", "chinese_calendar": "chinesecalendar>=1.11.0", "croniter": "croniter>=6.0.0",
    "Crypto": "pycryptodome>=3.23.0", "defusedxml": "defusedxml>=0.7.1", "docker": "docker>=7.1.0",
    "git": "gitpython>=3.1.44", "httpx": "httpx>=0.27.0", "jinja2": "jinja2>=3.1.6", "json5": "json5>=0.10.0",
    "lunar_python": "lunar-python>=1.3.12", "magic": "python-magic>=0.4.27", "matplotlib": "matplotlib>=3.10.3",
    "openpyxl": "openpyxl>=3.1.2", "pandas": "pandas>=2.3.0", "PIL": "pillow>=12.2.0", "psutil": "psutil>=7.0.0",
    "pypdf": "pypdf>=5.4.0", "sse_starlette": "sse-starlette>=2.2.1,<3.0.0", "tiktoken": "tiktoken>=0.7.0", "toml": "toml>=0.10.2", "tzlocal": "tzlocal>=5.2",
    "websockets": "websockets>=15.0.1",
}


def reference_requirement(module: str):
    """The requirement of the reference's own dependency a plugin imports
    as module (a top-level name), or None."""
    return REFERENCE_PACKAGES.get((module or "").split(".", 1)[0])


def _provided(req) -> bool:
    import re

    return re.sub(r"[-_.]+", "-", req.name).lower() in PROVIDED


def make_venv(env_dir: str, python: str) -> None:
    """A fresh environment at env_dir over the system's packages."""
    if os.path.lexists(env_dir):
        shutil.rmtree(env_dir)
    subprocess.run([python, "-m", "venv", "--without-pip", "--system-site-packages", env_dir],
                   check=True, capture_output=True, text=True, timeout=120)


def venv_python(env_dir: str) -> str:
    return os.path.join(env_dir, "bin", "python")


def site_packages(env_dir: str) -> str:
    return os.path.join(env_dir, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")


def pip_install(env_dir: str, index: str, specs: list, timeout: float = 600) -> None:
    """pip install specs into env_dir from index; a failure raises
    RequirementError naming the package pip could not install."""
    args = [venv_python(env_dir), "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
            "--no-warn-script-location"]
    if index.startswith(("http://", "https://")):
        args += ["--index-url", index]
    elif index:
        args += ["--no-index", "--find-links", index]
    else:
        args += ["--no-index"]
    try:
        done = subprocess.run(args + specs, capture_output=True, text=True, timeout=timeout, env=_pip_env())
    except subprocess.TimeoutExpired:
        raise RequirementError("installing %s took more than %d s" % (", ".join(specs), timeout),
                               specs[0] if len(specs) == 1 else "") from None
    if done.returncode != 0:
        raise explain((done.stdout or "") + "\n" + (done.stderr or ""), specs, index)


def _pip_env() -> dict:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # pip needs none of nekro_agent
    env["PIP_NO_CACHE_DIR"] = env.get("PIP_NO_CACHE_DIR", "1")
    return env


_NOT_FOUND = re.compile(r"Could not find a version that satisfies the requirement (\S+)(?: \(from versions: ([^)]*)\))?")
_NO_MATCH = re.compile(r"No matching distribution found for (\S+)")


def explain(output: str, specs: list, index: str) -> RequirementError:
    """pip's failure as one line naming the package."""
    where = index or "the system's packages (nekro has no --python-index)"
    m = _NOT_FOUND.search(output) or _NO_MATCH.search(output)
    if m:
        pkg = m.group(1)
        versions = m.group(2) if m.re is _NOT_FOUND else None
        found = " (versions there: %s)" % versions if versions and versions != "none" else ""
        return RequirementError("package %s is not available from %s%s" % (pkg, where, found), pkg)
    if "ResolutionImpossible" in output or "conflicting dependencies" in output:
        lines = [l.strip() for l in output.splitlines()]
        cause = [l for l in lines if l.startswith("The user requested") or " depends on " in l]
        cause = list(dict.fromkeys(cause))
        pkg = ""
        m = re.search(r"Cannot install (.+?) because", output)
        if m:
            pkg = m.group(1)
        return RequirementError("requirements conflict: cannot install %s: %s" % (pkg or ", ".join(specs), "; ".join(cause)), pkg)
    tail = " ".join(l.strip() for l in output.strip().splitlines()[-4:])
    return RequirementError("installing %s from %s failed: %s" % (", ".join(specs), where, tail[-1500:]),
                            specs[0] if len(specs) == 1 else "")


def installed(env_dir: str) -> dict:
    """The distributions installed in the environment itself, name -> version."""
    from importlib import metadata

    return {d.metadata["Name"]: d.version for d in metadata.distributions(path=[site_packages(env_dir)])}


def ensure(path: str, env_dir: str, index: str, python: str) -> dict:
    reqs = read_requirements(path)
    make_venv(env_dir, python)
    if reqs:
        pip_install(env_dir, index, reqs)
    return {"requirements": reqs, "installed": installed(env_dir)}


def main() -> None:
    path, env_dir, index, python = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    try:
        out = ensure(path, env_dir, index, python)
    except RequirementError as e:
        out = {"error": str(e), "package": e.package}
    except subprocess.CalledProcessError as e:
        out = {"error": "making the plugin's environment failed: %s" % (e.stderr or e.stdout or e).strip()[-1500:]}
    except Exception as e:  # noqa: BLE001 - reported to nekro as the plugin's load error
        out = {"error": "%s: %s" % (type(e).__name__, e)}
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
