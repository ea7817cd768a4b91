"""The reference's database models, read-only as nekro answers them (see
nekro_agent.models._base)."""
