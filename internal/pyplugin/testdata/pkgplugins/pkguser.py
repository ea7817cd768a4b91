from nekro_agent.api.plugin import NekroPlugin, SandboxMethodType, dynamic_import_pkg
from nekro_agent.api.schemas import AgentCtx

plugin = NekroPlugin(name="Package user", module_name="pkguser", description="uses dynamic_import_pkg",
                     version="1", author="tester", url="https://example.org")


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "use_pkg")
async def use_pkg(_ctx: AgentCtx) -> int:
    """Import a package that the host does not have."""
    pkg = dynamic_import_pkg("nekrotestpkg==1.0")
    return pkg.VALUE
