"""The reference's knowledge-base services, answered from nekro's
knowledge base for the call's chat (see nekro_agent._knowledge)."""
