"""Imports a name nekro_agent does not have: it must be listed with this
file and line, and the other plugins still load."""
from nekro_agent.api.plugin import NekroPlugin

from nekro_agent.api.no_such_module import something  # line 5

plugin = NekroPlugin(name="Missing", module_name="missing", description="", version="1", author="tester", url="")
