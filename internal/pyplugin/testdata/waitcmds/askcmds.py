"""Chat commands that ask their sender (the reference's CmdCtl.wait),
for nekro's tests: a question with options and context data answered by
an internal callback command, and one that times out; and an answer
with image and file segments."""
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


@plugin.mount_command(name="chart", description="Answer with an image and a file.")
async def chart(context: CommandExecutionContext) -> CommandResponse:
    import os
    import struct
    import tempfile
    import zlib

    from nekro_agent.services.command.schemas import CommandOutputSegment

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)

    d = tempfile.mkdtemp()
    png = os.path.join(d, "dot.png")
    with open(png, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))
    csv = os.path.join(d, "report.csv")
    with open(csv, "w") as f:
        f.write("day,cups\nmon,3\n")
    return CmdCtl.success([CommandOutputSegment(type="text", text="here is the chart"),
                           CommandOutputSegment(type="image", file_path=png),
                           CommandOutputSegment(type="file", file_path=csv),
                           CommandOutputSegment(type="file", file_path=os.path.join(d, "gone.txt"))])
