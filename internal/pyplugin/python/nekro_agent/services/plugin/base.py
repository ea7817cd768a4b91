"""NekroPlugin and ConfigBase at the reference's services path."""
from nekro_agent._config import ConfigBase, ExtraField
from nekro_agent.api.plugin import NekroPlugin, PluginStore, SandboxMethodType
from nekro_agent.services.plugin.schema import PromptInjectMethod, SandboxMethod, WebhookMethod

__all__ = ["ConfigBase", "ExtraField", "NekroPlugin", "PluginStore", "PromptInjectMethod", "SandboxMethod",
           "SandboxMethodType", "WebhookMethod"]
