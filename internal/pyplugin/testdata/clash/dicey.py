"""A dice plugin of the operator's own, for nekro's tests: it mounts the
method name nekro's built-in dice port mounts (dice_roll) and a command
of the same name as the port's (/dice_lock), so it replaces the port."""
from nekro_agent.api.plugin import CmdCtl, CommandPermission, NekroPlugin, SandboxMethodType
from nekro_agent.api.schemas import AgentCtx

plugin = NekroPlugin(name="Dicey", module_name="dicey", description="The operator's own dice.",
                     version="0.1.0", author="tester", url="")


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="Roll", description="Roll loaded dice.")
async def dice_roll(_ctx: AgentCtx, event_name: str, description: str, difficulty: int) -> str:
    """Roll the operator's loaded die.

    Args:
        event_name (str): what is tried.
        description (str): how.
        difficulty (int): 1 to 20.
    """
    return "dicey rolled 20 for %s (difficulty %d)" % (event_name, difficulty)


@plugin.mount_command(name="dice_lock", description="Lock the dice (the operator's way).",
                      permission=CommandPermission.SUPER_USER)
async def dice_lock(context) -> None:
    return CmdCtl.success("dicey locked")
