"""The reference's prompt activation (plugins asleep until the AI wakes
them): nekro shows every enabled plugin's methods."""
from nekro_agent import _unavailable

_WHY = "nekro has no prompt activation: every enabled plugin's methods are in the prompt"
__getattr__ = _unavailable.module_getattr("nekro_agent.services.plugin.prompt_activation", _WHY)
