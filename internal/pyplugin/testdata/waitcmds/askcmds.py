"""Chat commands that ask their sender (the reference's CmdCtl.wait),
for nekro's tests: a question with options and context data answered by
an internal callback command, and one that times out."""
from nekro_agent.api.plugin import CmdCtl, NekroPlugin
from nekro_agent.services.command.schemas import Arg, CommandExecutionContext, CommandResponse

plugin = NekroPlugin(name="Ask commands", module_name="askcmds", description="Commands that ask.",
                     version="1.0.0", author="tester", url="")


@plugin.mount_command(name="ask", description="Ask for a colour.")
async def ask(context: CommandExecutionContext):
    yield CmdCtl.message("let me ask")
    yield CmdCtl.wait("Which colour, %s?" % context.username, callback_cmd="ask_answer", options=["red", "blue"],
                      timeout=30, context_data={"asked_by": context.user_id})


@plugin.mount_command(name="ask_answer", description="Takes the answer.", internal=True)
async def ask_answer(context: CommandExecutionContext, colour: str = Arg("the colour", positional=True),
                     asked_by: str = Arg("who asked", default="")) -> CommandResponse:
    if colour not in ("red", "blue"):
        return CmdCtl.failed("%s is not an option" % colour)
    return CmdCtl.success("%s chose %s (asked %s)" % (context.user_id, colour, asked_by))


@plugin.mount_command(name="quick", description="Ask briefly.")
async def quick(context: CommandExecutionContext) -> CommandResponse:
    return CmdCtl.wait("Quick, yes or no?", callback_cmd="ask_answer", timeout=1, on_timeout_message="too slow")
