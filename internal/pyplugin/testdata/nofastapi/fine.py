"""A plugin next to the failing one, which loads."""
from nekro_agent.api.plugin import NekroPlugin

plugin = NekroPlugin(name="Fine", module_name="fine", description="loads", version="1.0.0", author="tester",
                     url="https://example.org")
