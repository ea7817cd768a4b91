"""A Python plugin for nekro's attack tests: it uses _ctx.fs the way
plugins written to the documents do (get_file(...).read_text(),
shared_path / name), and can kill its own process when asked."""
import os

from nekro_agent.api.plugin import NekroPlugin, SandboxMethodType
from nekro_agent.api.schemas import AgentCtx

plugin = NekroPlugin(
    name="Python guard tests",
    module_name="pyguard",
    description="Sandbox methods the attack tests call",
    version="1.0.0",
    author="tester",
    url="https://example.org",
)


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "read_shared")
async def read_shared(_ctx: AgentCtx, path: str) -> str:
    """Read a file the sandbox names, as the documents show."""
    return _ctx.fs.get_file(path).read_text()


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "write_shared")
def write_shared(_ctx: AgentCtx, name: str, text: str) -> str:
    """Write text into /app/shared/<name> through fs.shared_path."""
    p = _ctx.fs.shared_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return "written"


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "maybe_die")
def maybe_die(_ctx: AgentCtx, die: bool) -> str:
    """Kill the plugin's own process when die is true."""
    if die:
        os._exit(3)
    return "alive"


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "guard_pid")
async def guard_pid(_ctx: AgentCtx) -> int:
    """The plugin process's pid: it changes when the process restarts."""
    return os.getpid()


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "echo_value")
async def echo_value(_ctx: AgentCtx, value) -> str:
    """Describe the value it got."""
    return "%s %r" % (type(value).__name__, value)
