from nekro_agent.api.plugin import NekroPlugin, SandboxMethodType
from nekro_agent.api.schemas import AgentCtx

plugin = NekroPlugin(name="Fine", module_name="fine", description="loads", version="1.0.0", author="tester", url="")


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="ok")
async def fine_ok(_ctx: AgentCtx) -> str:
    return "fine"
