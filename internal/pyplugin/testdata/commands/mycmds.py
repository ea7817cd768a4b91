"""Chat commands written to the reference's command API, for nekro's
tests: Arg parsing (positional, key:value, greedy, range), permissions,
a command group, a streamed answer, an internal command and the store
from a command."""
from typing import Annotated

from nekro_agent.api.plugin import CmdCtl, CommandPermission, NekroPlugin
from nekro_agent.services.command.schemas import Arg, CommandExecutionContext, CommandResponse

plugin = NekroPlugin(name="My commands", module_name="mycmds", description="Commands for nekro's tests.",
                     version="1.0.0", author="tester", url="")


@plugin.mount_command(name="mycmd", description="Multiply a number.", aliases=["mc"], usage="mycmd <n> [times:<k>]")
async def mycmd(context: CommandExecutionContext,
                n: Annotated[int, Arg("the number", positional=True, range=(0, 100))],
                times: int = Arg("the factor", default=2)) -> CommandResponse:
    return CmdCtl.success("%d x %d = %d for %s (%s in %s, adapter %r)" % (
        n, times, n * times, context.username, context.user_id, context.chat_key, context.adapter_key))


@plugin.mount_command(name="wipeall", description="Wipe everything.", permission=CommandPermission.SUPER_USER)
async def wipeall(context: CommandExecutionContext) -> CommandResponse:
    return CmdCtl.success("wiped by %s (super %s)" % (context.user_id, context.is_super_user))


@plugin.mount_command(name="vet", description="Admins only.", permission="advanced")
async def vet(context: CommandExecutionContext) -> CommandResponse:
    return CmdCtl.failed("not today, %s" % context.username)


@plugin.mount_command(name="steps", description="Work in steps.")
async def steps(context: CommandExecutionContext, what: str = Arg("what to do", greedy=True, default="it")):
    yield CmdCtl.message("working on " + what)
    yield CmdCtl.success("done")


@plugin.mount_command(name="pick", description="Pick a colour.")
async def pick(context: CommandExecutionContext, colour: str = Arg("a colour", positional=True, choices=["red", "blue"])):
    return CmdCtl.success("picked " + colour)


settings = plugin.mount_command_group(name="kv", description="Chat values.", permission=CommandPermission.USER)


@settings.command(name="set", description="Set a value.", aliases=["put"])
async def kv_set(context: CommandExecutionContext, key: str = Arg("the key"), value: str = Arg("the value")):
    await plugin.store.set(chat_key=context.chat_key, store_key=key, value=value)
    return CmdCtl.success("%s = %s" % (key, value))


@settings.command(name="get", description="Read a value.")
async def kv_get(context: CommandExecutionContext, key: str = Arg("the key", positional=True)):
    return CmdCtl.success("%s is %s" % (key, await plugin.store.get(chat_key=context.chat_key, store_key=key)))


@plugin.mount_command(name="mycmd_callback", description="Answers a question.", internal=True)
async def callback(context: CommandExecutionContext) -> CommandResponse:
    return CmdCtl.success("called back")
