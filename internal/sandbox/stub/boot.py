# nekro run bootstrap: loads the generated stubs, then runs the AI's code
# (/app/.nekro/main.py) as __main__ with the stubs and _ck in its globals.
import builtins
import json
import linecache
import sys
import traceback

sys.path.insert(0, "/app/.nekro")
import api_caller  # noqa: E402

sys.path.remove("/app/.nekro")

with open("/app/.nekro/run.json", encoding="utf-8") as f:
    _run = json.load(f)
with open("/app/.nekro/main.py", encoding="utf-8") as f:
    _src = f.read()

_FILE = "main.py"
linecache.cache[_FILE] = (len(_src), None, _src.splitlines(True), _FILE)
_globals = {"__name__": "__main__", "__file__": _FILE, "__builtins__": builtins}
exec("from api_caller import *", _globals)
_globals["_ck"] = _run["chat_key"]


def _short_traceback(exc):
    """The traceback of the AI's own code only: frames of main.py."""
    te = traceback.TracebackException.from_exception(exc)
    frames = [fr for fr in te.stack if fr.filename == _FILE]
    lines = []
    if frames:
        lines.append("Traceback (most recent call last):\n")
        lines.extend(traceback.StackSummary.from_list(frames).format())
    lines.extend(te.format_exception_only())
    return "".join(lines)


try:
    _code = compile(_src, _FILE, "exec")
    exec(_code, _globals)
except SystemExit:
    raise
except BaseException as e:  # noqa: BLE001 - report everything, exit 1
    sys.stdout.flush()
    sys.stderr.write(_short_traceback(e))
    sys.stderr.flush()
    sys.exit(1)
