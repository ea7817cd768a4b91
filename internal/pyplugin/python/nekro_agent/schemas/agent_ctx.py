"""AgentCtx at the reference's schemas path."""
from nekro_agent.api.schemas import AgentCtx, WebhookRequest

__all__ = ["AgentCtx", "WebhookRequest"]
