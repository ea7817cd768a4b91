"""The reference's workspace services. In nekro every chat is its own
workspace (nekro_agent.models.db_workspace): its knowledge base and its
memories. nekro runs no Claude Code sandbox, so the sandbox's container,
client and communication log are stand-ins that raise NotAvailableError
saying so."""
